"""A torchtitan recipe (a Python configuration function) from a plan.

Targets torchtitan 0.3.0, the release users ``pip install`` and the version MemPlan's
``trace`` extra pins. A run there is ``--module M --config F`` (``config/manager.py``
``ConfigManager``): a registry function returning ``Trainer.Config``, then tyro
overrides ``--section.key value`` (booleans as ``--section.key`` /
``--section.no-key``, the activation checkpointing as the ``activation-checkpoint:full``
subcommand). The recipe starts from the registry function for the model and sets
``training`` (``local_batch_size`` = the plan's micro-batch, or micro × accumulation
under PP, where ``pipeline_parallel_microbatch_size`` = the micro-batch splits it;
``global_batch_size``; ``seq_len``), ``parallelism`` (its DP degrees multiply to the
plan's DP; EP is carved out of ``data_parallel_shard``), ``optimizer.implementation``
and ``activation_checkpoint`` (``FullAC`` / ``SelectiveAC`` / None). A PP recipe sets
``training.disable_cuda_graphs``: 0.3.0's ``Trainer.Config.__post_init__`` refuses PP
with CUDA graphs on (their default). The same job as overrides is in the docstring, and
is what ``--check`` hands ``ConfigManager.parse_args``.

torchtitan main after 0.3.0 (b5bcd76) renamed the batch fields to token counts
(``num_tokens_per_microbatch_per_dp_rank``, ``num_tokens_per_train_step``,
``max_context_length``) and PP's to ``num_pp_microbatches``; the importer reads both.
"""

from __future__ import annotations

from typing import Any

from engine.exports.common import (
    JOB_SHAPE_FIELDS,
    TORCH_DTYPE,
    Export,
    Gaps,
    comment_block,
    shard_group,
    stage_split,
    storage_gap,
    without_storage,
)
from engine.fileio.oneline import docstring_text, one_line
from engine.plan import Plan
from engine.presets import model_section_for
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.stacks.families import rule_of
from engine.workload import global_batch

TARGET = "torchtitan 0.3.0 (pip; --module/--config recipes)"
SCHEDULE = {"1f1b": "1F1B", "interleaved_1f1b": "Interleaved1F1B", "gpipe": "GPipe"}
IMPLEMENTATION = {"fused": "fused", "foreach": "foreach", "for_loop": "for-loop"}
AC = {"none": "None", "full": "FullAC.Config()", "selective": "SelectiveAC.Config()"}
BASE_CONFIGS = {
    "llama-3.1-8b": ("torchtitan.models.llama3.config_registry", "llama3_8b"),
    "llama-3.1-70b": ("torchtitan.models.llama3.config_registry", "llama3_70b"),
    "llama-3.1-405b": ("torchtitan.models.llama3.config_registry", "llama3_405b"),
    "qwen3-0.6b": ("torchtitan.models.qwen3.config_registry", "qwen3_0_6b"),
    "qwen3-1.7b": ("torchtitan.models.qwen3.config_registry", "qwen3_1_7b"),
    "qwen3-14b": ("torchtitan.models.qwen3.config_registry", "qwen3_14b"),
    "qwen3-30b-a3b": ("torchtitan.models.qwen3.config_registry", "qwen3_30b_a3b"),
    "qwen3-32b": ("torchtitan.models.qwen3.config_registry", "qwen3_32b"),
    "deepseek-v3": ("torchtitan.models.deepseek_v3.config_registry", "deepseek_v3_671b"),
}
"""Registry functions whose model spec is the preset's architecture."""


def _base(plan: Plan, gaps: Gaps) -> tuple[str, str]:
    preset = plan.model.preset or ""
    found = BASE_CONFIGS.get(preset)
    same = False
    if found is not None:
        try:
            mine = without_storage(plan.model.architecture)
            theirs = without_storage(model_section_for(preset).architecture)
            # fused q / k / v is torchtitan's own code (runtime.qkv_fusion), not the spec
            same = theirs.model_copy(update={"fused_qkv": mine.fused_qkv}) == mine
        except KeyError:
            same = False
    why = "torchtitan's GroupedExperts holds w1, w2, w3 as (experts, …) parameters"
    storage_gap(plan.model.architecture, "stacked", gaps, why)
    if not same:
        gaps.add(
            "model.architecture",
            "torchtitan builds its own model spec from its registry; "
            f"{one_line(plan.model.name)} is not one of them (llama3_8b is the placeholder)",
        )
        return BASE_CONFIGS["llama-3.1-8b"]
    assert found is not None
    return found


def _degrees(plan: Plan, gaps: Gaps) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree)."""
    par = plan.parallelism
    rule = rule_of(par.strategy)
    if rule.shards_nothing and rule.family == "ddp":
        # torchtitan's DDP replicates only (a shard degree > 1 turns FSDP on); its DDP runs
        # no EP (legality says so), so EP is not carried here.
        if par.dp == 1 and par.tp * par.pp * par.cp * par.ep > 1:
            gaps.add(
                "parallelism.strategy",
                "one DP rank beside TP/PP/CP/EP is no data parallelism in torchtitan "
                "(read back as one FSDP2 replica)",
            )
        return par.dp, 1
    if par.strategy == "fsdp2_hsdp":
        sg = shard_group(plan)
        if sg == 1 or sg == par.dp:
            gaps.add("parallelism.strategy", "this HSDP is plain DDP or FSDP2 in torchtitan")
            gaps.add("parallelism.shard_group_size", "follows the strategy")
        return par.dp // sg, sg
    if par.strategy != "fsdp2":
        gaps.add("parallelism.strategy", f"{par.strategy} written as FSDP2 full sharding")
    elif par.dp == 1:
        gaps.add("parallelism.strategy", "with one DP rank torchtitan shards nothing")
    return 1, par.dp


def _precision(plan: Plan, gaps: Gaps) -> dict[str, Any]:
    prec = plan.method.precision
    c = prec.compute_dtype
    if c == "fp16":
        gaps.add("method.precision.compute_dtype", "torchtitan has no float16 mixed precision")
    if (
        prec.policy not in ("autocast", "pure_16bit", "fp32")
        or (prec.policy == "pure_16bit" and c != "bf16")
        or (prec.policy == "autocast" and c == "fp32")
    ):
        gaps.add("method.precision.policy", f"{prec.policy} with {c} has no torchtitan dtype")
    if prec.grad_dtype != "fp32" and prec.policy != "pure_16bit":
        gaps.add("method.precision.grad_dtype", "mixed_precision_reduce is float32 only")
    pure = prec.policy == "pure_16bit"
    if pure and prec.grad_dtype != "bf16":
        gaps.add("method.precision.grad_dtype", "training.dtype bfloat16 reduces in bf16")
    if prec.loss_scaling:
        gaps.add("method.precision.loss_scaling", "torchtitan has no loss scaling")
    return {
        "dtype": "bfloat16" if pure else "float32",
        "mixed_precision_param": TORCH_DTYPE["fp32" if c == "fp32" or pure else "bf16"],
        "mixed_precision_reduce": "float32",
    }


def _pipeline(plan: Plan, gaps: Gaps) -> dict[str, Any]:
    par = plan.parallelism
    out: dict[str, Any] = {
        "pipeline_parallel_degree": par.pp,
        "pipeline_parallel_schedule": SCHEDULE[par.pp_schedule],
    }
    if par.pp == 1:
        return out
    # local_batch_size is split into pipeline microbatches of this size (trainer.py)
    out["pipeline_parallel_microbatch_size"] = plan.batch.micro_batch
    if par.virtual_stages > 1:
        gaps.add("parallelism.virtual_stages", "set module_fqns_per_model_part per chunk")
        return out
    parts, start = [], 0
    for n in stage_split(plan):
        names = [f"layers.{i}" for i in range(start, start + n)]
        start += n
        parts.append(names)
    parts[0].insert(0, "tok_embeddings")
    parts[-1] += ["norm", "output"]
    out["module_fqns_per_model_part"] = parts
    return out


def titan_config(plan: Plan) -> tuple[str, str, dict[str, dict[str, Any]], str, Gaps]:
    """(base module, base function, section → field → value, AC expression, gaps)."""
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, b, off = plan.parallelism, plan.batch, plan.offload
    gaps = Gaps()
    stack = resolve_stack_defaults(plan).stack
    if stack != "torchtitan":
        gaps.add("stack.name", f"a torchtitan recipe runs torchtitan, not {stack}")
    if plan.method.kind != "full":
        gaps.add("method.kind", f"{plan.method.kind}: torchtitan's LoRA is a model converter")
    module, fn = _base(plan, gaps)
    if "model.architecture" in gaps.items and par.pp > 1:
        gaps.add("parallelism.pp_layer_split", "written for this model, read for the placeholder")
    rep, shard = _degrees(plan, gaps)
    raf = par.knobs.fsdp_reshard_after_forward
    if not isinstance(raf, bool):
        gaps.add("parallelism.knobs.fsdp_reshard_after_forward", f"no int form ({raf})")
    if par.expert_tp > 1:
        gaps.add("parallelism.expert_tp", "torchtitan has no expert tensor parallelism")
    if off.optimizer != off.params or off.params == "nvme":
        gaps.add("offload.optimizer", "enable_cpu_offload moves every state to the CPU")
        gaps.add("offload.params", "enable_cpu_offload moves every state to the CPU")
    rc = plan.method.recompute.policy
    if rc not in AC:
        gaps.add("method.recompute.policy", f"{rc} is not a torchtitan AC policy")
    if par.tp == 1 and par.sequence_parallel:
        gaps.add("parallelism.sequence_parallel", "needs TP")
    # Under PP torchtitan runs one accumulation step of local_batch_size ÷ micro pipeline
    # microbatches (trainer.py num_pipeline_parallel_microbatches); else local = micro.
    local = b.micro_batch * (b.grad_accum if par.pp > 1 else 1)
    training: dict[str, Any] = {
        "local_batch_size": local,
        "global_batch_size": global_batch(plan),
        "seq_len": b.seq_len,
        **_precision(plan, gaps),
        "enable_cpu_offload": off.params == "cpu",
    }
    if par.pp > 1:
        training["disable_cuda_graphs"] = True
    parallelism = {
        "data_parallel_replicate_degree": rep,
        "data_parallel_shard_degree": shard,
        "fsdp_reshard_after_forward": "never" if raf is False else "always",
        "tensor_parallel_degree": par.tp,
        "enable_sequence_parallel": par.sequence_parallel,
        "context_parallel_degree": par.cp,
        "expert_parallel_degree": par.ep,
        **_pipeline(plan, gaps),
    }
    impl = {"implementation": IMPLEMENTATION[plan.method.optimizer.implementation]}
    if plan.method.optimizer.name != "adamw":
        gaps.add("method.optimizer.name", "the recipe keeps the registry's AdamW")
    compile_ = {"enable": plan.workload.torch_compile}
    sections = {
        "training": training,
        "parallelism": parallelism,
        "optimizer": impl,
        "compile": compile_,
    }
    return module, fn, sections, AC.get(rc, "FullAC.Config()"), gaps


def expressed(plan: Plan) -> frozenset[str]:
    """The plan fields this plan's recipe carries."""
    p = resolved(plan)
    out = {
        *JOB_SHAPE_FIELDS,
        "model.architecture",
        "parallelism.sequence_parallel",
        "parallelism.cp",
        "parallelism.ep",
        "parallelism.pp",
        "parallelism.pp_schedule",
        "parallelism.pp_layer_split",
        "parallelism.knobs.fsdp_reshard_after_forward",
        "method.precision.policy",
        "method.precision.compute_dtype",
        "method.precision.grad_dtype",
        "method.precision.loss_scaling",
        "method.optimizer.implementation",
        "method.recompute.policy",
        "offload.optimizer",
        "offload.params",
        "workload.torch_compile",
    }
    if p.parallelism.pp > 1:
        out.add("parallelism.virtual_stages")
    return frozenset(out)


AC_SUBCOMMAND = {"none": "none", "full": "full", "selective": "selective"}
"""The plan's recompute policy as 0.3.0's tyro subcommand ``activation-checkpoint:…``."""


def _flag(section: str, key: str, value: Any) -> list[str]:
    """One tyro override as 0.3.0's ``--help`` spells it (``--training.local-batch-size 8``,
    ``--training.no-enable-cpu-offload``, a list of lists as comma-joined words)."""
    name = key.replace("_", "-")
    if isinstance(value, bool):
        return [f"--{section}.{name}" if value else f"--{section}.no-{name}"]
    if isinstance(value, list):
        return [f"--{section}.{name}", *(",".join(part) for part in value)]
    return [f"--{section}.{name}", str(value)]


def titan_argv(plan: Plan) -> tuple[str, str, list[str]]:
    """(registry module, function, overrides): the recipe as torchtitan 0.3.0's command
    line, the arguments ``ConfigManager.parse_args`` takes after ``--module/--config``."""
    module, fn, sections, _ac, _gaps = titan_config(plan)
    out = [w for sec, body in sections.items() for k, v in body.items() for w in _flag(sec, k, v)]
    rc = resolved(plan).method.recompute.policy
    out.append(f"activation-checkpoint:{AC_SUBCOMMAND.get(rc, 'full')}")
    return module, fn, out


def export_torchtitan(plan: Plan) -> Export:
    module, fn, sections, ac, gaps = titan_config(plan)
    world = resolved(plan).parallelism.world_size
    flags = " ".join(titan_argv(plan)[2])
    lines = [
        f'"""torchtitan recipe for {docstring_text(plan.model.name)}, written by MemPlan '
        f"({TARGET}).",
        "",
        "Run (this file importable, e.g. on PYTHONPATH):",
        f"    NGPU={world} MODULE=memplan_recipe CONFIG=memplan_job ./run_train.sh",
        "(several nodes: torchrun --nnodes N --nproc_per_node G -m torchtitan.train "
        "--module memplan_recipe --config memplan_job)",
        "",
        "The same job as torchtitan 0.3.0's command-line overrides:",
        f"    ./run_train.sh --module {module} --config {fn} {flags}",
        '"""',
        "",
    ]
    lines += comment_block(gaps()).splitlines()
    lines += [
        "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC",
        f"from {module} import {fn}",
        "from torchtitan.trainer import Trainer",
        "",
        "",
        "def memplan_job() -> Trainer.Config:",
        f"    config = {fn}()",
    ]
    for sec, body in sections.items():
        lines += [f"    config.{sec}.{k} = {v!r}" for k, v in body.items()]
    lines += [f"    config.activation_checkpoint = {ac}", "    return config", ""]
    return Export("torchtitan", "memplan_recipe.py", "\n".join(lines), gaps(), TARGET)
