"""transformers' causal-LM loss before 4.49: the shifted logits copy.

Up to 4.48 ``transformers/loss/loss_utils.py`` ``ForCausalLMLoss`` (and before 4.46 each
model's ``forward``) shifted the upcast logits with ``shift_logits = logits[..., :-1,
:].contiguous()``: a copy of b·(s − 1) rows, alive beside the fp32 upcast and the
log-probs while ``cross_entropy`` runs; #35646 (first in 4.49.0) pads the labels
instead. Llama-3.1-8B under the plain PyTorch stack (hf-transformers profile), FSDP2 × 8,
s 8192, micro-batch 2: the copy is (16,384 − 2) × 128,256 × 4 = 8,404,359,168 B, in the
loss's forward only (the slice's backward makes a full-size zero gradient after the
log-probs' backward has freed two fp32 T × V tensors, below the loss-backward peak).
"""

from __future__ import annotations

from engine.ledger.activations.loss import shifts_logits
from engine.stacks.defaults import resolved
from tests.engine.ledger.test_torchtitan_profile import rows_of, titan

SHIFT_COPY = (16_384 - 2) * 128_256 * 4


def _forward(version: str) -> int:
    plan = titan(stack__name="pytorch", runtime__transformers_version=version)
    return rows_of(plan)["hbm.loss.forward_transient"].low


def test_old_transformers_copies_the_shifted_logits() -> None:
    assert _forward("4.47.0") - _forward("5.24.0") == SHIFT_COPY == 8_404_359_168
    assert _forward("4.48.3") - _forward("4.49.0") == SHIFT_COPY
    old = rows_of(titan(stack__name="pytorch", runtime__transformers_version="4.47.0"))
    new = rows_of(titan(stack__name="pytorch"))
    assert old["hbm.loss.backward_transient"] == new["hbm.loss.backward_transient"]


def test_only_the_hf_profile_reads_the_version() -> None:
    assert resolved(titan()).runtime.transformers_version == "5.24.0"
    assert not shifts_logits(resolved(titan(runtime__transformers_version="4.47.0")).runtime)
    plain = resolved(titan(stack__name="pytorch", runtime__transformers_version="4.47.0"))
    assert shifts_logits(plain.runtime)
