"""How routed experts are stored, and what follows from it.

transformers 5.24 holds a layer's experts as two 3-D parameters
(``models/mixtral/modeling_mixtral.py`` ``MixtralExperts.__init__``: ``gate_up_proj``
``(E, 2I, h)``, ``down_proj`` ``(E, h, I)``); torchtitan as three
(``torchtitan/models/moe/moe.py`` ``GroupedExperts``: ``w1``, ``w3`` ``(E, I, h)``,
``w2`` ``(E, h, I)``); Megatron-Core's TEGroupedMLP one weight per expert. FSDP2 chunks
each parameter on dim 0 and pads every shard to chunk 0's ``ceil(d0/N)`` rows (torch 2.13
``_fully_shard/_fsdp_param.py`` ``FSDPParam._init_sharded_param``, ``_chunk_with_empty``).
"""

from __future__ import annotations

from ledger_plans import TINY_MOE

from engine.estimate import estimate
from engine.ledger.states.persistent import stage_held
from engine.models.inventory import build_inventory, total_params
from engine.plan import default_plan, with_values
from engine.stacks.defaults import resolve_stack_defaults, resolved

STORAGE = "model.architecture.moe.expert_storage"


def _plan(storage: str = "auto", **changes: object) -> object:
    return with_values(
        default_plan(),
        {
            "model.architecture": {
                **TINY_MOE,
                "moe": {**TINY_MOE["moe"], "expert_storage": storage},
            },  # type: ignore[dict-item]
            "batch.seq_len": 4,
            **changes,
        },
    )


def _experts(storage: str) -> list[tuple[str, tuple[int, ...]]]:
    arch = resolved(_plan(storage)).model.architecture  # type: ignore[attr-defined]
    return [(t.name, t.shape) for t in build_inventory(arch) if ".experts." in t.name]


def test_fused_and_stacked_shapes_hold_the_same_elements() -> None:
    """E 4, I 16, h 8, 2 layers. transformers: gate_up (4, 32, 8) + down (4, 8, 16) = 1,536
    per layer; torchtitan: w1 (4, 16, 8), w2 (4, 8, 16), w3 (4, 16, 8) = 1,536; per expert:
    4 × (16·8 + 16·8 + 8·16) = 1,536. Same total, 2 / 3 / 12 tensors a layer."""
    layer0 = "model.layers.0.mlp.experts"  # transformers 5 MixtralDecoderLayer.mlp
    fused = _experts("fused_gate_up")
    assert fused[:2] == [
        (f"{layer0}.gate_up_proj", (4, 32, 8)),
        (f"{layer0}.down_proj", (4, 8, 16)),
    ]
    stacked = _experts("stacked")
    assert [s for _, s in stacked[:3]] == [(4, 16, 8), (4, 8, 16), (4, 16, 8)]
    per_expert = _experts("per_expert")
    assert (len(fused), len(stacked), len(per_expert)) == (4, 6, 24)
    totals = {
        sum(a * b * c for _, (a, b, c) in fused),
        sum(a * b * c for _, (a, b, c) in stacked),
        sum(a * b for _, (a, b) in per_expert),
    }
    assert totals == {2 * 1536}


def test_the_stack_decides_the_storage() -> None:
    """Megatron-Core → per expert, torchtitan → stacked, the HF-model stacks → fused; a dense
    model has no experts to decide."""
    for stack, want in (
        ("megatron_core", "per_expert"),
        ("torchtitan", "stacked"),
        ("hf_trainer", "fused_gate_up"),
        ("pytorch", "fused_gate_up"),
    ):
        strategy = "megatron_distopt" if stack == "megatron_core" else "fsdp2"
        plan = _plan(**{"stack.name": stack, "parallelism.strategy": strategy})
        r = resolve_stack_defaults(plan)  # type: ignore[arg-type]
        assert r.plan.model.architecture.moe is not None
        assert r.plan.model.architecture.moe.expert_storage == want
        assert r.derived[STORAGE].value == want
    assert STORAGE not in resolve_stack_defaults(default_plan()).derived


def test_parameter_totals_do_not_depend_on_the_storage() -> None:
    """Only shapes change: ``memplan models`` totals stay exact."""
    arch = resolved(_plan("fused_gate_up")).model.architecture  # type: ignore[attr-defined]
    per = resolved(_plan("per_expert")).model.architecture  # type: ignore[attr-defined]
    assert total_params(build_inventory(arch)) == total_params(build_inventory(per))


def _expert_elems(plan: object) -> int:
    """Routed-expert elements one rank holds after FSDP2's dim-0 chunking."""
    held, _ = stage_held(resolved(plan), 0)  # type: ignore[arg-type]
    return sum(
        -(-t.shape[0] // t.group) * (t.numel // t.shape[0]) * t.count
        for t in held
        if ".experts." in t.name
    )


def test_fsdp2_with_more_ranks_than_experts_holds_whole_experts() -> None:
    """FSDP2 over 8 ranks, 4 experts. Fused: gate_up (4, 32, 8) chunks to ceil(4/8) = 1 row
    = 256 elements, down (4, 8, 16) to 128: 384 a layer, 768 for 2 layers — every rank
    holds one whole expert, 2× the even share of 1,536·2/8 = 384. Per expert: gate and up
    (16, 8) chunk to 2 rows = 16 each, down (8, 16) to 1 row = 16: 48 × 4 experts × 2
    layers = 384. The estimate says why, and what avoids it."""
    fused = _plan("fused_gate_up", **{"parallelism.strategy": "fsdp2", "parallelism.dp": 8})
    per = _plan("per_expert", **{"parallelism.strategy": "fsdp2", "parallelism.dp": 8})
    assert _expert_elems(fused) == 768
    assert _expert_elems(per) == 384
    (note,) = estimate(fused).notes  # type: ignore[arg-type]
    assert "4 experts over 8 ranks" in note and "2.00×" in note and "parallelism.ep" in note
    assert estimate(per).notes == ()  # type: ignore[arg-type]


def test_fsdp2_sharding_experts_evenly_says_nothing() -> None:
    """4 experts over 4 ranks: one each, no padding, no note."""
    plan = _plan("fused_gate_up", **{"parallelism.strategy": "fsdp2", "parallelism.dp": 4})
    assert _expert_elems(plan) == 2 * 1536 // 4
    assert estimate(plan).notes == ()  # type: ignore[arg-type]


def test_expert_parallelism_slices_the_expert_dim() -> None:
    """EP 2 over DP 2 (folded): rank 0 keeps experts [0, 2) of each stacked tensor:
    gate_up (2, 32, 8) and down (2, 8, 16), 768 a layer; DDP shards nothing."""
    plan = _plan("fused_gate_up", **{"parallelism.dp": 2, "parallelism.ep": 2})
    held, _ = stage_held(resolved(plan), 0)  # type: ignore[arg-type]
    shapes = [t.shape for t in held if ".experts." in t.name]
    assert shapes[:2] == [(2, 32, 8), (2, 8, 16)]
    assert _expert_elems(plan) == 2 * 768


def test_adamw_keeps_one_step_counter_per_stored_tensor() -> None:
    """torch.optim.AdamW keeps a 0-d ``step`` per parameter (512 B allocated each): the
    experts are 2 tensors a layer fused, 12 per expert, so 2 layers differ by 20 counters
    = 10,240 B, and nothing else of the optimizer differs."""

    def step(storage: str) -> int:
        return next(r.high for r in estimate(_plan(storage)).rows if r.id == "hbm.optimizer.step")  # type: ignore[arg-type]

    assert step("per_expert") - step("fused_gate_up") == (24 - 4) * 512


def test_deepseek_router_stays_fp32_as_transformers_keeps_it() -> None:
    """transformers 5 builds DeepSeek's router in fp32 whatever the model dtype
    (``modeling_deepseek_v3.py`` ``DeepseekV3PreTrainedModel._keep_in_fp32_modules_strict``
    = gate.weight, e_score_correction_bias): a bf16 plan holds gate.weight (E 8 × h 256)
    as 8 · 256 · 4 = 8,192 B; Megatron-Core (per expert) holds it in bf16, 4,096 B."""
    from tests.trace.grid import tiny_arch

    arch = tiny_arch("deepseek_v3").model_dump(mode="json")
    for storage, dtype in (("fused_gate_up", "fp32"), ("per_expert", "bf16")):
        arch["moe"]["expert_storage"] = storage
        changes = {"model.architecture": arch, "method.precision.policy": "pure_16bit"}
        held, _ = stage_held(resolved(with_values(default_plan(), changes)), 0)
        (gate, *_) = [t for t in held if t.name.endswith("mlp.gate.weight")]
        assert gate.shape == (8, 256) and gate.param_dtype == dtype


def test_deepseek_score_bias_is_a_buffer_in_transformers() -> None:
    """``DeepseekV3TopkRouter.e_score_correction_bias`` is an ``nn.Buffer`` in transformers
    5: held (fp32), never trained — no gradient, no moments. The per-expert inventory
    keeps its earlier rule (a trained parameter): that path is not changed here."""
    from tests.trace.grid import tiny_arch

    arch = tiny_arch("deepseek_v3").model_dump(mode="json")
    for storage, trained in (("fused_gate_up", False), ("per_expert", True)):
        arch["moe"]["expert_storage"] = storage
        held, _ = stage_held(resolved(with_values(default_plan(), {"model.architecture": arch})), 0)
        biases = [t for t in held if t.name.endswith("e_score_correction_bias")]
        assert biases and all(t.trainable is trained for t in biases)
