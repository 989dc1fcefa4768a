"""torchao's 8-bit AdamW (``method.optimizer.adam8bit_library = torchao``), following
torchao/prototype/low_bit_optim/adam.py at ao 26648c2 (the torchao of torchtune's November
2024 README): ``_AdamBase._new_buffer`` gives a tensor of at least 4096 elements that
divides into 256-element blocks an ``OptimState8bit`` per moment (uint8 codes, an fp32
scale per block, a 256-entry fp32 qmap; subclass_8bit.py ``OptimState8bit.zeros``) and
any other tensor ``zeros_like(p)``; ``step`` is a host tensor; ``_AdamBase.step``
compiles ``single_param_adam`` for one parameter at a time, from fp32 upcasts of p, grad
and both moments (engine/ledger/peaks/torchao_step.py)."""

from __future__ import annotations

from ledger_plans import SMOL

from engine.estimate import estimate
from engine.ledger.states.optimizers import state_allocs
from engine.plan import Plan, default_plan, with_values
from engine.sections.method import OptimizerSection

TORCHAO = OptimizerSection(name="adam8bit", adam8bit_library="torchao")

BASE = {
    "model.preset": None,
    "model.name": "SmolLM-135M",
    **{f"model.architecture.{k}": v for k, v in SMOL.items()},
    "stack.name": "pytorch",
    "parallelism.strategy": "ddp",
    "parallelism.dp": 1,
    "method.optimizer.name": "adam8bit",
    "method.optimizer.adam8bit_library": "torchao",
    "method.precision.policy": "pure_16bit",
    "batch.seq_len": 512,
}

EMBED = 49_152 * 576
"""SmolLM-135M's largest parameter, the tied embedding: 28,311,552 elements."""


def _rows(plan: Plan) -> dict[str, tuple[int, int, str]]:
    return {r.id: (r.low, r.high, r.source) for r in estimate(plan).heaviest.rows}


def test_8bit_state_of_one_matrix() -> None:
    """The 1536 × 576 MLP weight, 884,736 elements (≥ 4096, 3456 blocks of 256): 1 B an
    element per moment, an fp32 scale per block per moment (3456 × 4 = 13,824 B each),
    and the two moments' 256-entry fp32 qmaps (2 × 1024 B); no step counter on the GPU.
    bitsandbytes' layout differs: one 4-B step tensor and no qmap per tensor."""
    allocs = {a.name: a.n_bytes for a in state_allocs(TORCHAO, (1536, 576), 2)}
    assert allocs == {
        "exp_avg": 884_736,
        "exp_avg_sq": 884_736,
        "exp_avg_scale": 13_824,
        "exp_avg_sq_scale": 13_824,
        "quant_map": 2_048,
    }
    bnb = {a.name for a in state_allocs(OptimizerSection(name="adam8bit"), (1536, 576), 2)}
    assert "step" in bnb and "quant_map" not in bnb


def test_small_or_unblocked_tensors_keep_state_in_the_parameters_dtype() -> None:
    """A 576-element norm weight (< 4096) and a 4097-element tensor (not a multiple of
    256) get ``zeros_like(p)``: bf16 here, 2 B an element per moment — where bitsandbytes
    keeps the norm's state in fp32 (4 B) and quantizes the 4097 elements."""
    norm = {a.name: a.n_bytes for a in state_allocs(TORCHAO, (576,), 2)}
    assert norm == {"exp_avg": 1_152, "exp_avg_sq": 1_152}
    odd = {a.name: a.n_bytes for a in state_allocs(TORCHAO, (4097,), 2)}
    assert odd == {"exp_avg": 8_194, "exp_avg_sq": 8_194}
    bnb = {a.name: a.n_bytes for a in state_allocs(OptimizerSection(name="adam8bit"), (576,), 2)}
    assert bnb["exp_avg"] == 576 * 4


def test_the_compiled_step_scratch_is_one_parameters_fp32_upcasts() -> None:
    """After backward, the step of the largest parameter (the embedding) bounds the
    scratch: 0 where Inductor fuses every upcast, 4 fp32 copies (p, grad, exp_avg,
    exp_avg_sq) = 4 × 28,311,552 × 4 = 452,984,832 B where each is a buffer.
    bitsandbytes' in-place kernel has no such row."""
    rows = _rows(with_values(default_plan(), BASE))
    assert rows["hbm.optimizer_step.temporaries"] == (0, 452_984_832, "torchao-low-bit-optim")
    assert rows["hbm.optimizer.exp_avg"][2] == "torchao-low-bit-optim"
    bnb = _rows(
        with_values(default_plan(), {**BASE, "method.optimizer.adam8bit_library": "bitsandbytes"})
    )
    assert "hbm.optimizer_step.temporaries" not in bnb


def test_in_backward_the_largest_parameters_step_scratch_joins_its_gradient() -> None:
    """torchtune optimizer_in_bwd: the embedding's bf16 gradient, 28,311,552 × 2 =
    56,623,104 B, plus its compiled step's 0 – 452,984,832 B: 56,623,104 –
    509,607,936 B while backward runs; no optimizer-phase row."""
    rows = _rows(with_values(default_plan(), {**BASE, "method.optimizer.in_backward": True}))
    assert rows["hbm.grads.in_backward"][:2] == (2 * EMBED, 2 * EMBED + 16 * EMBED)
    assert "hbm.optimizer_step.temporaries" not in rows


def test_bitsandbytes_plans_keep_their_config_hash() -> None:
    """``adam8bit_library`` is left out of the canonical form at bitsandbytes (every plan
    saved before the field existed meant bitsandbytes), and hashed once set to torchao —
    so the goldens' config hashes stay those of before the field."""
    plan = default_plan()
    assert "adam8bit_library" not in plan.canonical_tree()["method"]["optimizer"]
    assert "adam8bit_library" in plan.model_dump(mode="json")["method"]["optimizer"]
    ao = with_values(plan, {"method.optimizer.adam8bit_library": "torchao"})
    assert ao.canonical_tree()["method"]["optimizer"]["adam8bit_library"] == "torchao"
    assert ao.config_hash() != plan.config_hash()
