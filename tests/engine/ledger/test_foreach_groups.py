"""AdamW's foreach temporaries per parameter group (issue 35 item 8).

torch ``optim/adam.py`` ``_multi_tensor_adam`` runs once per param group and, inside,
per (device, dtype) bucket (``Optimizer._group_tensors_by_device_and_dtype``):
``torch._foreach_sqrt(exp_avg_sqs)`` makes one state-dtype copy of the bucket; the
previous bucket's copy is still bound while the next is made, and all are freed when
the group's call returns. transformers ``Trainer.create_optimizer`` builds two groups
(``get_decay_parameter_names``: biases and norms go to the no-decay one); a plain
script passes ``model.parameters()``, one group.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine.estimate import estimate
from engine.ledger.peaks.optimizer_step import foreach_peak, no_decay
from engine.plan import with_values
from engine.presets import plan_for_model_preset
from engine.stacks.defaults import resolved


def _temporaries(stack: str) -> int:
    plan = plan_for_model_preset("llama-3.2-1b")
    changes = {"stack.name": stack, "method.optimizer.implementation": "foreach"}
    e = estimate(resolved(with_values(plan, changes)))
    return next(r.high for r in e.rows if r.id == "hbm.optimizer_step.temporaries")


def test_hf_trainer_leaves_out_the_no_decay_group() -> None:
    """Llama-3.2-1B (tied), FSDP2 over 8 ranks, fp32 states, 512-B blocks. Each shard:
    embedding 128,256 · 2,048 / 8 · 4 = 131,334,144 B; per layer q and o 2,097,152 B
    each, k and v 524,288, gate/up/down 8,388,608 each, two norms 256 · 4 = 1,024 each
    → 30,410,752 B × 16 = 486,572,032; final norm 1,024. One group (plain script):
    617,907,200 B. HF Trainer: the decay group only, without the 33 norms (33,792 B):
    617,873,408 B."""
    assert _temporaries("pytorch") == 131_334_144 + 16 * 30_410_752 + 1_024 == 617_907_200
    assert _temporaries("hf_trainer") == 617_907_200 - 33 * 1_024 == 617_873_408


def test_no_decay_names() -> None:
    """``get_decay_parameter_names``' patterns: bias, layernorm, rmsnorm, ``norm`` as a
    whole name part, ``_norm``."""
    assert no_decay("model.layers.0.input_layernorm.weight")
    assert no_decay("model.norm.weight")
    assert no_decay("model.layers.3.self_attn.q_norm.weight")
    assert no_decay("transformer.h.0.attn.c_attn.bias")
    assert not no_decay("model.layers.0.self_attn.q_proj.weight")
    assert not no_decay("model.embed_tokens.weight")


def test_consecutive_buckets_overlap() -> None:
    """Within one group, a bf16 bucket after an fp32 one: the fp32 copy (80) is still
    bound while the bf16 one (30) is made → 110; the no-decay group (50) is separate."""
    totals = {(False, "fp32"): 80, (False, "bf16"): 30, (True, "fp32"): 50}
    assert foreach_peak(totals)[0] == 80 + 30


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=6))
def test_peak_bounds(sizes: list[int]) -> None:
    """One group: the peak is at least the largest bucket and at most the sum; one
    bucket alone is its own size."""
    totals = {(False, f"d{i}"): b for i, b in enumerate(sizes)}
    peak, _ = foreach_peak(totals)
    assert max(sizes) <= peak <= sum(sizes)
    assert foreach_peak({(False, "fp32"): sizes[0]})[0] == sizes[0]
