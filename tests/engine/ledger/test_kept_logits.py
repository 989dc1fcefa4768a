"""Logits a training loop keeps by holding the model output (``runtime.kept_logits``),
hand-derived for Answer.AI's fsdp_qlora LoRA of Llama-2-7B (V 32,000, bf16, FSDP1 over 2
ranks) at micro-batch 6, s 2048: T = 12,288 tokens, T·V = 393,216,000.

fsdp_qlora ``train.py`` ``fsdp_main`` binds ``output = model(...)``, runs
``loss.backward()`` and ``optimizer.step()`` and only then sets ``output = None``. Under
transformers <= 4.44 ``LlamaForCausalLM.forward`` returns ``logits = logits.float()`` and
feeds ``shift_logits = logits[..., :-1, :].contiguous()`` to ``CrossEntropyLoss``:

- kept: the fp32 logits T·V·4 = 1,572,864,000 B, live from the loss to after the step;
- forward transient: the bf16 logits are freed once ``.float()`` returns, and the peak is
  in ``log_softmax`` with the shifted copy b·(s − 1)·V·4 = 6·2047·32000·4 =
  1,572,096,000 B beside the kept logits and the log-probs it makes;
- the loss's backward: kept 4 + log-probs 4 + their gradient 4 + the logits' gradient
  4 = 16 B per T·V element (``log_softmax_backward_data`` allocates its output while
  its input gradient and saved output are live): 6,291,456,000 B of loss tensors.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from tests.engine.allocator.published import ANSWERAI_7B_LORA, plan_of

TV = 6 * 2048 * 32_000
LABELS = 98_816
"""The padded int64 labels, 6·2049·8 = 98,352 B rounded up to 512 B."""


def plan(kept: str) -> Plan:
    base = plan_of("llama-2-7b", {**ANSWERAI_7B_LORA, "batch.seq_len": 2048})
    return with_values(base, {"batch.micro_batch": 6, "runtime.kept_logits": kept})


def rows_of(p: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(p).heaviest.rows}


def test_a_loop_holding_an_fp32_output_keeps_the_logits_through_the_step() -> None:
    rows = rows_of(plan("fp32"))
    kept = rows["hbm.loss.kept_output"]
    assert kept.low == kept.high == TV * 4 == 1_572_864_000
    assert {"forward", "backward.start", "backward.middle", "optimizer"} <= kept.moments
    assert "steady" not in kept.moments  # output = None before the next forward
    fwd = rows["hbm.loss.forward_transient"]
    hidden = 6 * 2048 * 4096 * 2  # the frozen head's input, held by the output
    # + the int64 labels the loss pads, 6·2049·8 = 98,352 B rounded to 512 B: 98,816
    assert fwd.low == 6 * 2047 * 32_000 * 4 + hidden + LABELS == 1_572_096_000 + 100_762_112
    at_loss = sum(
        r.low
        for r in rows.values()
        if r.id in {"hbm.loss.kept_output", "hbm.loss.saved", "hbm.loss.backward_transient"}
    )
    assert at_loss == 16 * TV == 6_291_456_000


def test_hf_trainer_keeps_none_and_a_newer_transformers_keeps_16_bit() -> None:
    """HF Trainer's ``compute_loss`` returns the loss alone (``none``: no row, the bf16
    logits and the fp32 upcast in the forward transient); transformers >= 4.45 upcasts
    inside the loss, so a loop holding the output keeps the bf16 logits T·V·2 and the
    forward transient is the fp32 upcast alone."""
    none = rows_of(plan("none"))
    assert "hbm.loss.kept_output" not in none
    hidden = 6 * 2048 * 4096 * 2
    assert none["hbm.loss.forward_transient"].low == TV * 2 + TV * 4 + hidden + LABELS
    compute = rows_of(plan("compute"))
    assert compute["hbm.loss.kept_output"].low == TV * 2 == 786_432_000
    assert compute["hbm.loss.forward_transient"].low == TV * 4 + hidden + LABELS
