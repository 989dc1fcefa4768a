"""TP style per stack: what TP does with the embedding, the output layer and the logits.

Llama-3.1-8B (V = 128,256, h = 4,096, untied): the embedding and the LM head are
V·h = 525,336,576 elements each. Under TP 2 Megatron's VocabParallelEmbedding and
ColumnParallelLinear output layer keep V/2 rows of each (262,668,288 elements) and the
vocab-parallel cross-entropy keeps V/2 logits per token
(``megatron/core/tensor_parallel/layers.py``, ``cross_entropy.py``). transformers'
``base_model_tp_plan`` has no entry for ``embed_tokens`` (whole on every rank) and maps
``lm_head`` to ``colwise_rep`` (weight split by vocabulary, logits gathered whole);
a DTensor ``parallelize_module`` over the decoder layers alone keeps both whole. The
default plan's working weights are fp32 (autocast): 4 B per element; s = 4,096 tokens of
fp32 log-probs are saved for backward, 4,096 · V · 4 B = 2,101,346,304 B whole.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import Plan, default_plan, with_values
from engine.stacks.defaults import resolved

HALF = 262_668_288
WHOLE_LOGITS = 4096 * 128_256 * 4


def _plan(style: str, stack: str = "auto") -> Plan:
    return with_values(
        default_plan(),
        {
            "parallelism.tp": 2,
            "parallelism.dp": 4,
            "parallelism.strategy": "ddp",
            "parallelism.tp_style": style,
            "stack.name": stack,
            "runtime.allocation_granularity_bytes": 1,
        },
    )


def _rows(plan: Plan) -> dict[str, int]:
    return {r.id: r.high for r in estimate(plan).rows}


def test_each_style_keeps_what_its_framework_keeps() -> None:
    """Weights: replicated_embedding adds the other half of the embedding (HALF × 4 B =
    1,050,673,152 B), replicated the other half of the LM head too. Logits: whole under
    both gathering styles, half under vocab_parallel."""
    vp = _rows(_plan("vocab_parallel"))
    rep_emb = _rows(_plan("replicated_embedding"))
    rep = _rows(_plan("replicated"))
    assert rep_emb["hbm.weights"] - vp["hbm.weights"] == HALF * 4 == 1_050_673_152
    assert rep["hbm.weights"] - rep_emb["hbm.weights"] == HALF * 4
    assert rep_emb["hbm.grads"] - vp["hbm.grads"] == HALF * 4  # fp32 grads, DDP
    assert vp["hbm.loss.saved"] == WHOLE_LOGITS // 2
    assert rep_emb["hbm.loss.saved"] == rep["hbm.loss.saved"] == WHOLE_LOGITS


def test_the_stack_chooses_the_default_and_the_user_overrides_it() -> None:
    """auto: a plain PyTorch script / HF Trainer runs transformers' tp_plan
    (replicated_embedding); Megatron-Core and torchtitan split the vocabulary. A value
    the user sets wins over the stack's."""
    assert resolved(_plan("auto")).parallelism.tp_style == "replicated_embedding"
    assert resolved(_plan("auto", "hf_trainer")).parallelism.tp_style == "replicated_embedding"
    assert resolved(_plan("auto", "megatron_core")).parallelism.tp_style == "vocab_parallel"
    assert resolved(_plan("auto", "torchtitan")).parallelism.tp_style == "vocab_parallel"
    assert resolved(_plan("replicated", "megatron_core")).parallelism.tp_style == "replicated"
    assert _rows(_plan("auto")) == _rows(_plan("replicated_embedding"))


def test_without_tp_the_style_changes_nothing() -> None:
    one = {"parallelism.tp": 1, "parallelism.dp": 8}
    a = _rows(with_values(_plan("vocab_parallel"), one))
    b = _rows(with_values(_plan("replicated"), one))
    assert a == b
