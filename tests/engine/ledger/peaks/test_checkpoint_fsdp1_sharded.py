"""FSDP1's ``SHARDED_STATE_DICT`` save on the GPU (``checkpoint.staging gpu``), hand-derived
from torch's FSDP1 state-dict code.

``torch/distributed/fsdp/_state_dict_utils.py``: ``_sharded_pre_state_dict_hook`` unshards
each unit (``_common_unshard_pre_state_dict_hook`` -> ``_enter_unshard_params_ctx``) and
the unit's post hook reshards it, so the root unit stays unsharded while all its
children are visited; ``_sharded_post_state_dict_hook`` makes each parameter a
ShardedTensor whose local shard is ``chunks[rank].clone()``
(``_shard_utils._create_chunk_sharded_tensor``), kept on the GPU unless
``ShardedStateDictConfig.offload_to_cpu`` (accelerate v0.28.0 sets no config for
``SHARDED_STATE_DICT``; v0.31.0 sets ``offload_to_cpu=True``). peft's
``get_peft_model_state_dict`` calls ``model.state_dict()`` before filtering the adapters,
so every clone is alive at once.

PEFT's Llama-2-70B QLoRA over FSDP1 on 2 ranks (tests/data/published/cases.jsonl, NF4
stored as bf16, vocab 32,008, LoRA r 8 on all 7 linears, bf16 adapters):
- 4-bit linears: per layer 2·8192² + 2·8192·1024 + 3·8192·28672 = 855,638,016 params,
  × 80 = 68,451,041,280, at 0.5 B = 34,225,520,640 B;
- frozen bf16: embedding + lm_head 2 · 32,008 · 8192 = 524,419,072 and the norms
  8192 · 161 = 1,318,912: 525,737,984 params × 2 B = 1,051,475,968 B;
- adapters: 8 · (2·16384 + 2·9216 + 3·36864) = 1,294,336 per layer × 80 × 2 B =
  207,093,760 B;
- the NF4 quant_state (absmax, nested absmax) is no parameter: not cloned.
Clones per rank: (34,225,520,640 + 1,051,475,968 + 207,093,760) / 2 = 17,742,045,184 B.
Root unit unsharded (embedding, lm_head, final norm): 2 · 262,209,536 · 2 + 8192 · 2 =
1,048,854,528 B. Row: 18,790,899,712 B.
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.ledger.row import Row
from engine.plan import Plan, with_values
from engine.stacks.applicability import no_effect
from engine.validation.published import case_plan, load_cases

CLONES = 17_742_045_184
ROOT = 1_048_854_528


def _plan(**changes: object) -> Plan:
    (case,) = (c for c in load_cases() if c.id == "peft-llama2-70b-qlora-fsdp-no-offload")
    return with_values(case_plan(case), dict(changes))


def _rows(plan: Plan) -> dict[str, Row]:
    return {r.id: r for r in estimate(plan).heaviest.rows}


def test_staged_on_the_gpu_every_shard_is_cloned_with_the_root_unshard() -> None:
    rows = _rows(_plan(**{"checkpoint.staging": "gpu"}))
    row = rows["hbm.checkpoint.sharded_clones"]
    assert row.low == row.high == CLONES + ROOT
    assert rows["hbm.gathered.root"].high == ROOT  # the same root unit training gathers
    assert row.phases == frozenset({"checkpoint"})


def test_host_staging_or_fsdp2_or_no_shard_clones_nothing_on_the_gpu() -> None:
    for changes in (
        {},  # default staging host: offload_to_cpu moves each clone off as it is made
        {"checkpoint.staging": "gpu", "parallelism.strategy": "fsdp2"},  # DTensor shards
        {"checkpoint.staging": "gpu", "parallelism.strategy": "fsdp1_no_shard"},
    ):
        rows = _rows(_plan(**changes))
        assert "hbm.checkpoint.sharded_clones" not in rows, changes
        assert "hbm.checkpoint.gathered" not in rows, changes


def test_the_save_is_the_checkpoint_phase_peak_above_the_persistent_rows() -> None:
    est = estimate(_plan(**{"checkpoint.staging": "gpu"})).heaviest
    persistent = sum(
        r.high
        for r in est.rows
        if r.location == "hbm"
        and r.allocated
        and "checkpoint" in r.phases
        and r.id != "hbm.checkpoint.sharded_clones"
        and r.state != "grads"  # zero_grad(set_to_none=True) after the step freed them
    )
    assert est.phases["checkpoint"].high == persistent + CLONES + ROOT


def test_staging_applies_to_fsdp1_sharded_state_dicts_only() -> None:
    def idle(plan: Plan) -> bool:
        return any(n.covers("checkpoint.staging") for n in no_effect(plan))

    assert not idle(_plan())
    assert idle(_plan(**{"parallelism.strategy": "fsdp2"}))
