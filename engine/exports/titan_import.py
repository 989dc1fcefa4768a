"""A plan from a torchtitan configuration: a ``config_registry.py`` recipe function, a
recipe module, a command line of ``--section.key`` overrides, or a 0.2-era TOML job file.

A recipe is read, never run (:mod:`engine.exports.titan_recipe` walks its syntax tree);
the model is the flavor it names (``model_registry("70B")``, a TOML's ``[model]
name/flavor``) or the registry function it starts from, mapped to MemPlan's preset
(:mod:`engine.exports.titan_cli`). ``data_parallel_shard_degree = -1`` — torchtitan's
default — is resolved as ``parallel_dims.py`` does, over the world torchrun names or
the base plan's. Sizes the file does not give take torchtitan's defaults
(``TrainingConfig``: a 2048 context and 16,384 tokens per micro-batch; the TOML era's
``local_batch_size`` 8). Older TOML files use ``local_batch_size`` /
``global_batch_size`` / ``seq_len`` and an ``[activation_checkpoint] mode``; both
vocabularies are understood.
"""

from __future__ import annotations

import ast
import tomllib
import warnings
from typing import Any

from engine.errors import field_path, quote
from engine.exports.common import DTYPE_OF_TORCH, Imported, as_int, balanced_or
from engine.exports.import_values import Sizes
from engine.exports.titan_cli import (
    FLAVOR_OF_FUNCTION,
    CommandLine,
    derived_model,
    parse_command,
    preset_of,
)
from engine.exports.titan_recipe import Recipe, read_recipe
from engine.exports.torchtitan import BASE_CONFIGS, IMPLEMENTATION, SCHEDULE
from engine.fileio.strict_json import MAX_DEPTH, ConfigFileError, check_tree, max_depth
from engine.plan import Plan, with_values
from engine.presets import model_section_for

Tree = dict[str, dict[str, Any]]
_INV_SCHEDULE = {v.lower(): k for k, v in SCHEDULE.items()}
_INV_IMPL = {v: k for k, v in IMPLEMENTATION.items()}
_PRESET_OF = {fn: preset for preset, (_, fn) in BASE_CONFIGS.items()}
_READ = {
    "training": {
        "num_tokens_per_microbatch_per_dp_rank",
        "max_context_length",
        "num_tokens_per_train_step",
        "seq_len",
        "local_batch_size",
        "global_batch_size",
        "dtype",
        "mixed_precision_param",
        "mixed_precision_reduce",
        "enable_cpu_offload",
    },
    "parallelism": {
        "data_parallel_replicate_degree",
        "data_parallel_shard_degree",
        "fsdp_reshard_after_forward",
        "tensor_parallel_degree",
        "enable_sequence_parallel",
        "context_parallel_degree",
        "expert_parallel_degree",
        "expert_tensor_parallel_degree",
        "pipeline_parallel_degree",
        "pipeline_parallel_schedule",
        "module_fqns_per_model_part",
        "num_pp_microbatches",
        "pipeline_parallel_microbatch_size",
    },
}
_HARMLESS = {
    "steps",
    "max_norm",
    "gc_freq",
    "gc_debug",
    "disable_cuda_graphs",  # a PP recipe must set it in 0.3.0; CUDA graphs are not modelled
    "spmd_backend",
    "context_parallel_load_balancer",
    "context_parallel_ptrr_mask_key",
    "pipeline_parallel_schedule_csv",
    "dataset",
    "dataset_path",
    "enable_async_tensor_parallel",
}
"""Keys that change no memory MemPlan counts (schedule, logging, data)."""


def _parse(text: str, function: str | None) -> tuple[Tree, str | None, Recipe, CommandLine]:
    """The settings of a recipe, a TOML file or overrides, in the plan loader's limits."""
    if max_depth(text) > MAX_DEPTH:
        raise ConfigFileError(f"it nests more than {MAX_DEPTH} levels deep")
    tree, ac, rec, cmd = _first_reading(text, function)
    check_tree(tree)
    return tree, ac, rec, cmd


MAX_RECIPE_CHARS = 2**17
"""The largest text parsed as a Python recipe (real ones are a few KB): ``ast.parse``
takes seconds on a megabyte of statements and cannot be interrupted while it runs."""


def _python(text: str) -> ast.Module | None:
    if len(text) > MAX_RECIPE_CHARS:
        return None
    try:
        with warnings.catch_warnings():  # a mutated recipe's SyntaxWarnings are not the user's
            warnings.simplefilter("ignore")
            return ast.parse(text)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None  # not Python (or too deep to be a recipe): a TOML file or overrides


def _first_reading(text: str, function: str | None) -> tuple[Tree, str | None, Recipe, CommandLine]:
    module = _python(text)
    if module is not None:
        try:
            rec = read_recipe(module, function)
        except RecursionError:
            rec = Recipe()
        if rec.tree or rec.flavor or rec.function:
            return rec.tree, rec.ac, rec, CommandLine()
    try:
        toml = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        toml = {}
    if toml:
        ac_section = toml.get("activation_checkpoint")
        mode = ac_section.get("mode") if isinstance(ac_section, dict) else None
        found = toml.get("model")
        model: dict[str, Any] = found if isinstance(found, dict) else {}
        rec = Recipe(family=model.get("name"), flavor=model.get("flavor"))
        rec.flavor = str(rec.flavor) if rec.flavor is not None else None
        rec.family = str(rec.family) if rec.family is not None else None
        return toml, _MODES.get(mode) if isinstance(mode, str) else None, rec, CommandLine()
    cmd = parse_command(text)
    mode = cmd.tree.get("activation_checkpoint", {}).get("mode")
    rec = Recipe(function=cmd.function, family=cmd.module)
    return cmd.tree, _MODES.get(mode) if isinstance(mode, str) else None, rec, cmd


_MODES = {"none": "none", "full": "full", "selective": "selective"}


def _table(tree: Tree, name: str, warn: list[str]) -> dict[str, Any]:
    """A section of the file; one that is not a table is named and skipped."""
    body = tree.get(name)
    if body is None:
        return {}
    if not isinstance(body, dict):
        warn.append(f"[{name}] is not a table of settings: not read")
        return {}
    return body


def import_torchtitan(text: str, base: Plan, function: str | None = None) -> Imported:
    """A plan from a torchtitan recipe / overrides / TOML over ``base``; ``function``
    names the recipe function of a file that holds several."""
    tree, ac, rec, cmd = _parse(text, function)
    if not tree and cmd.config_file:
        raise ValueError(
            f"its settings are in --job.config-file {quote(cmd.config_file)}: import that "
            "TOML (and this command over it with --base)"
        )
    if not tree and not rec.flavor and not rec.function:
        big = (
            f"; a recipe over {MAX_RECIPE_CHARS // 1024} KiB is not read"
            if len(text) > MAX_RECIPE_CHARS
            else ""
        )
        raise ValueError(f"no torchtitan settings found (config.<section>.<key> = …){big}")
    ch: dict[str, Any] = {"stack.name": "torchtitan", "method.kind": "full"}
    res: list[str] = []
    warn: list[str] = []
    t, p = _table(tree, "training", warn), _table(tree, "parallelism", warn)
    sz = Sizes()

    def size(body: dict[str, Any], sec: str, key: str, default: int, used: str) -> int:
        return sz.size(f"{sec}.{key}", body.get(key), default, used)

    arch = _model(rec, cmd, base, ch, res, warn)
    if cmd.config_file:
        warn.append(
            f"--job.config-file {quote(cmd.config_file)} is not read from here: import that "
            "TOML, then these overrides over it (--base); torchtitan's defaults are used"
        )
    legacy = "local_batch_size" in t or "seq_len" in t or "global_batch_size" in t
    seq_key = "seq_len" if legacy else "max_context_length"
    seq = size(t, "training", seq_key, 2048, "torchtitan's default")
    ch["batch.seq_len"] = seq
    mb_tokens = sz.optional(
        "training.num_tokens_per_microbatch_per_dp_rank",
        t.get("num_tokens_per_microbatch_per_dp_rank"),
    )
    if mb_tokens is None and not legacy:
        mb_tokens = 16384  # TrainingConfig's default num_tokens_per_microbatch_per_dp_rank
    default = "torchtitan's default"
    mb = mb_tokens // seq if mb_tokens else size(t, "training", "local_batch_size", 8, default)
    if mb < 1:
        warn.append(f"{mb_tokens} tokens per micro-batch is under one sequence of {seq}: read as 1")
        mb = 1
    ch["batch.micro_batch"] = mb
    ep = size(p, "parallelism", "expert_parallel_degree", 1, "")
    rep = size(p, "parallelism", "data_parallel_replicate_degree", 1, "")
    tp = size(p, "parallelism", "tensor_parallel_degree", 1, "")
    cp = size(p, "parallelism", "context_parallel_degree", 1, "")
    pp = size(p, "parallelism", "pipeline_parallel_degree", 1, "")
    if p.get("data_parallel_shard_degree", -1) == -1:
        shard = _rest_of_world(cmd.world, base, rep * cp * tp * pp, res)
    else:
        shard = size(p, "parallelism", "data_parallel_shard_degree", 1, "")
    # The plan folds EP over TP × CP × DP, so its DP is every data-parallel rank
    # (replicate × shard), the EP ranks among them; a shard degree of 1 is DDP.
    if shard == 1 and rep == 1 and tp * cp * pp * ep > 1:
        # no data parallelism beside TP/CP/PP/EP: torchtitan applies no DDP wrapper, so
        # it is one unsharded replica (MemPlan's DDP on torchtitan runs no second dim)
        strategy, dp, sg = "fsdp2", 1, None
    elif shard == 1:
        strategy, dp, sg = "ddp", rep, None
    elif rep == 1:
        strategy, dp, sg = "fsdp2", shard, None
    else:
        strategy, dp, sg = "fsdp2_hsdp", rep * shard, shard
    ch.update(
        {
            "parallelism.strategy": strategy,
            "parallelism.dp": dp,
            "parallelism.shard_group_size": sg,
            "parallelism.ep": ep,
            "parallelism.tp": tp,
            "parallelism.cp": cp,
            "parallelism.pp": pp,
            "parallelism.sequence_parallel": p.get("enable_sequence_parallel", True) is True,
            "parallelism.pp_schedule": _INV_SCHEDULE.get(
                str(p.get("pipeline_parallel_schedule", "1F1B")).lower(), "1f1b"
            ),
            "parallelism.knobs.fsdp_reshard_after_forward": p.get("fsdp_reshard_after_forward")
            != "never",
        }
    )
    if ch["parallelism.tp"] == 1:
        ch["parallelism.sequence_parallel"] = False
    if ch["parallelism.pp"] == 1:
        ch["parallelism.pp_layer_split"] = None
        ch["parallelism.virtual_stages"] = 1
    parts = p.get("module_fqns_per_model_part")
    if isinstance(parts, list) and parts:
        split = [
            sum(1 for m in part if str(m).startswith("layers."))
            for part in parts
            if isinstance(part, list)
        ]
        if sum(split) != arch.layers:
            warn.append(f"module_fqns_per_model_part holds {sum(split)} layers, not {arch.layers}")
            ch["parallelism.pp_layer_split"] = None
        elif len(split) == ch["parallelism.pp"]:
            ch["parallelism.pp_layer_split"] = balanced_or(split, arch.layers)
            ch["parallelism.virtual_stages"] = 1
        else:
            warn.append("module_fqns_per_model_part with virtual stages is not read")
    step = sz.optional("training.num_tokens_per_train_step", t.get("num_tokens_per_train_step"))
    raw_gb = t.get("global_batch_size")
    gb = (
        step // seq
        if step
        else None
        if raw_gb == -1  # 0.3.0's default: local batch × DP, one accumulation step
        else sz.optional("training.global_batch_size", raw_gb)
    )
    if legacy and pp > 1:
        mb, gb = _pp_micro(p, mb, gb or mb * dp, sz, warn), gb or mb * dp
        ch["batch.micro_batch"] = mb
    per_step = mb * dp
    ga = gb // per_step if gb and gb % per_step == 0 else 1
    if gb and gb % per_step:
        warn.append(f"global batch {gb} is not a multiple of micro × DP replicas {per_step}")
    ch["batch.grad_accum"], ch["batch.global_batch"] = ga, None
    _precision(t, ch)
    off = t.get("enable_cpu_offload") is True
    ch["offload.params"] = ch["offload.optimizer"] = "cpu" if off else "none"
    impl = _table(tree, "optimizer", warn).get("implementation")
    if isinstance(impl, str) and impl in _INV_IMPL:
        ch["method.optimizer.implementation"] = _INV_IMPL[impl]
    elif impl:
        warn.append(f"optimizer.implementation {quote(impl)} is not modelled")
    ch["workload.torch_compile"] = _table(tree, "compile", warn).get("enable") is True
    if ac is None:
        ac = "selective"
        res.append("activation_checkpoint not set: torchtitan's default SelectiveAC")
    ch["method.recompute.policy"] = ac
    if as_int(p.get("expert_tensor_parallel_degree")) not in (None, 1):
        warn.append("expert_tensor_parallel_degree is gone from torchtitan main; not read")
    for sec, body in (("training", t), ("parallelism", p)):
        for key in sorted(set(body) - _READ[sec] - _HARMLESS):
            warn.append(f"{field_path((sec, key))} is not modelled")
    return Imported(with_values(base, ch), tuple(res), (*sz.warnings, *warn))


def _pp_micro(p: dict[str, Any], local: int, gb: int, sz: Sizes, warn: list[str]) -> int:
    """The plan's micro-batch under 0.3.0's PP: ``local_batch_size`` is split into
    pipeline microbatches of ``pipeline_parallel_microbatch_size`` (default 1;
    ``trainer.py`` ``num_pipeline_parallel_microbatches``), so the plan's accumulation
    is global ÷ (that size × DP)."""
    raw = p.get("pipeline_parallel_microbatch_size")
    micro = sz.size("parallelism.pipeline_parallel_microbatch_size", raw, 1, "torchtitan's default")
    if local % micro:
        warn.append(
            f"local_batch_size {local} is not a multiple of pipeline_parallel_microbatch_size "
            f"{micro} (torchtitan refuses it)"
        )
    return micro


def _rest_of_world(world: int | None, base: Plan, others: int, res: list[str]) -> int:
    """``data_parallel_shard_degree = -1`` as torchtitan's ``ParallelDims`` resolves it
    (``parallel_dims.py``): world ÷ (replicate · cp · tp · pp)."""
    whose = "torchrun's --nnodes × --nproc_per_node"
    if world is None:
        world, whose = base.parallelism.world_size, "the plan's"
    if world % others:
        raise ValueError(
            f"data_parallel_shard_degree -1 leaves {world} GPUs ({whose}) ÷ "
            f"replicate·cp·tp·pp {others}, not a whole number (torchtitan refuses it)"
        )
    res.append(
        f"data_parallel_shard_degree -1: {world} GPUs ({whose}) ÷ replicate·cp·tp·pp "
        f"{others} = {world // others} (torchtitan's parallel_dims.py)"
    )
    return world // others


def _model(
    rec: Recipe,
    cmd: CommandLine,
    base: Plan,
    ch: dict[str, Any],
    res: list[str],
    warn: list[str],
) -> Any:
    """The model the file names (a registry function, a flavor), set into ``ch``."""
    fn = rec.base_fn or rec.function
    why = ""
    family, flavor = FLAVOR_OF_FUNCTION.get(str(fn), (rec.family, rec.flavor))
    made = derived_model(family, flavor) if flavor is not None else None
    if made is not None:
        ch["model"] = made.model_dump(mode="json")
        res.append(f"{family} {flavor}: model {made.name}, dims from torchtitan's flavor table")
        return made.architecture
    if rec.flavor is not None:
        preset, why = preset_of(rec.family, rec.flavor)
        said = f"{rec.family} {rec.flavor}"
    elif fn in _PRESET_OF:
        preset, said = _PRESET_OF[fn], str(fn)
    elif fn:
        if cmd.function:
            raise ValueError(
                f"--config {fn} is not a torchtitan registry function MemPlan knows the "
                "model of; name a file that holds it as FILE::function"
            )
        warn.append(f"{quote(fn)}: not a model MemPlan knows; the plan's model is kept")
        return base.model.architecture
    else:
        res.append(f"no model named: the plan's {base.model.name} kept")
        return base.model.architecture
    try:
        model = model_section_for(preset)
    except KeyError:
        raise ValueError(f"{said} has no MemPlan model preset ({preset})") from None
    ch["model"] = model.model_dump(mode="json")
    res.append(
        f"{said}: model {model.name} (torchtitan's registry spec){'; ' + why if why else ''}"
    )
    if cmd.function:
        warn.append(
            f"--config {fn}: that function's own settings are not in this file; "
            "torchtitan's defaults are used where the overrides say nothing"
        )
    return model.architecture


def _precision(t: dict[str, Any], ch: dict[str, Any]) -> None:
    if t.get("dtype") == "bfloat16":
        policy, compute, grad = "pure_16bit", "bf16", "bf16"
    else:
        compute = DTYPE_OF_TORCH.get(str(t.get("mixed_precision_param", "bfloat16")), "bf16")
        policy = "fp32" if compute == "fp32" else "autocast"
        grad = DTYPE_OF_TORCH.get(str(t.get("mixed_precision_reduce", "float32")), "fp32")
    ch["method.precision.policy"] = policy
    ch["method.precision.compute_dtype"] = compute
    ch["method.precision.grad_dtype"] = grad
    ch["method.precision.loss_scaling"] = False
