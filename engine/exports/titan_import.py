"""A plan from a torchtitan configuration: a recipe module, ``--section.key`` overrides,
or a 0.2-era TOML job file.

A recipe is read, never run: its ``config.<section>.<key> = <literal>`` assignments and
``activation_checkpoint`` choice are taken from the syntax tree (``ast.literal_eval``),
and the registry function it starts from names the model. Older TOML files use
``local_batch_size`` / ``global_batch_size`` / ``seq_len`` and an
``[activation_checkpoint] mode``; both vocabularies are understood.
"""

from __future__ import annotations

import ast
import tomllib
import warnings
from typing import Any

from engine.errors import field_path, quote
from engine.exports.common import DTYPE_OF_TORCH, Imported, as_int, balanced_or
from engine.exports.import_values import Sizes
from engine.exports.torchtitan import BASE_CONFIGS, IMPLEMENTATION, SCHEDULE
from engine.fileio.strict_json import MAX_DEPTH, ConfigFileError, check_tree, max_depth
from engine.plan import Plan, with_values
from engine.presets import model_section_for

Tree = dict[str, dict[str, Any]]
_INV_SCHEDULE = {v.lower(): k for k, v in SCHEDULE.items()}
_INV_IMPL = {v: k for k, v in IMPLEMENTATION.items()}
_AC = {"FullAC": "full", "SelectiveAC": "selective", "None": "none"}
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
    },
}
_HARMLESS = {
    "steps",
    "max_norm",
    "gc_freq",
    "gc_debug",
    "disable_cuda_graphs",
    "spmd_backend",
    "context_parallel_load_balancer",
    "context_parallel_ptrr_mask_key",
    "pipeline_parallel_schedule_csv",
    "dataset",
    "dataset_path",
}
"""Keys that change no memory MemPlan counts (schedule, logging, data)."""


def _recipe(text: str) -> tuple[Tree, str | None, str | None]:
    """(section → key → value, AC policy, base function) from a recipe's syntax tree."""
    tree: Tree = {}
    ac: str | None = None
    base: str | None = None
    with warnings.catch_warnings():  # a mutated recipe's SyntaxWarnings are not the user's
        warnings.simplefilter("ignore")
        module = ast.parse(text)
    for node in ast.walk(module):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("config_registry"):
            base = node.names[0].name
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = ast.unparse(node.targets[0]).split(".")
        if target[:1] != ["config"]:
            continue
        if target[1:] == ["activation_checkpoint"]:
            head = ast.unparse(node.value).split(".")[0].split("(")[0]
            ac = _AC.get(head, "full")
        elif len(target) == 3:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                continue
            section = tree.setdefault(target[1], {})
            if isinstance(section, dict):
                section[target[2]] = value
    return tree, ac, base


def _overrides(text: str) -> Tree:
    """``--section.key value`` pairs anywhere in a command line."""
    tokens = text.replace("\\\n", " ").split()
    tree: Tree = {}
    for i, tok in enumerate(tokens):
        if tok.startswith("--") and "." in tok and i + 1 < len(tokens):
            sec, _, key = tok[2:].partition(".")
            raw = tokens[i + 1]
            try:
                value: Any = ast.literal_eval(raw)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                value = {"true": True, "false": False}.get(raw.lower(), raw)
            tree.setdefault(sec, {})[key.replace("-", "_")] = value
    return tree


def _parse(text: str) -> tuple[Tree, str | None, str | None]:
    """The settings of a recipe, a TOML file or overrides, in the plan loader's limits."""
    if max_depth(text) > MAX_DEPTH:
        raise ConfigFileError(f"it nests more than {MAX_DEPTH} levels deep")
    tree, ac, base = _first_reading(text)
    check_tree(tree)
    return tree, ac, base


MAX_RECIPE_CHARS = 2**17
"""The largest text parsed as a Python recipe (real ones are a few KB): ``ast.parse``
takes seconds on a megabyte of statements and cannot be interrupted while it runs."""


def _first_reading(text: str) -> tuple[Tree, str | None, str | None]:
    try:
        tree, ac, base = _recipe(text) if len(text) <= MAX_RECIPE_CHARS else ({}, None, None)
        if tree:
            return tree, ac, base
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        pass  # not Python (or too deep to be a recipe): a TOML file or overrides
    try:
        toml = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError, RecursionError):
        toml = {}
    if toml:
        ac_section = toml.get("activation_checkpoint")
        mode = ac_section.get("mode") if isinstance(ac_section, dict) else None
        modes = {"none": "none", "full": "full", "selective": "selective"}
        return toml, modes.get(mode) if isinstance(mode, str) else None, None
    return _overrides(text), None, None


def _table(tree: Tree, name: str, warn: list[str]) -> dict[str, Any]:
    """A section of the file; one that is not a table is named and skipped."""
    body = tree.get(name)
    if body is None:
        return {}
    if not isinstance(body, dict):
        warn.append(f"[{name}] is not a table of settings: not read")
        return {}
    return body


def import_torchtitan(text: str, base: Plan) -> Imported:
    """A plan from a torchtitan recipe / overrides / TOML over ``base``."""
    tree, ac, fn = _parse(text)
    if not tree:
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

    arch = base.model.architecture
    if fn in _PRESET_OF:
        model = model_section_for(_PRESET_OF[fn])
        ch["model"] = model.model_dump(mode="json")
        arch = model.architecture
        res.append(f"{fn}: model {model.name} (torchtitan's registry spec)")
    elif fn:
        warn.append(f"{quote(fn)}: not a model MemPlan knows; the plan's model is kept")
    seq_key = "max_context_length" if "max_context_length" in t else "seq_len"
    seq = size(t, "training", seq_key, base.batch.seq_len, "the plan's")
    ch["batch.seq_len"] = seq
    mb_tokens = sz.optional(
        "training.num_tokens_per_microbatch_per_dp_rank",
        t.get("num_tokens_per_microbatch_per_dp_rank"),
    )
    mb = mb_tokens // seq if mb_tokens else size(t, "training", "local_batch_size", 1, "")
    if mb < 1:
        warn.append(f"{mb_tokens} tokens per micro-batch is under one sequence of {seq}: read as 1")
        mb = 1
    ch["batch.micro_batch"] = mb
    ep = size(p, "parallelism", "expert_parallel_degree", 1, "")
    rep = size(p, "parallelism", "data_parallel_replicate_degree", 1, "")
    if p.get("data_parallel_shard_degree") == -1:
        warn.append("data_parallel_shard_degree -1 (the rest of the world) is read as 1")
        shard = 1
    else:
        shard = size(p, "parallelism", "data_parallel_shard_degree", 1, "")
    # The plan folds EP over TP × CP × DP, so its DP is every data-parallel rank
    # (replicate × shard), the EP ranks among them; a shard degree of 1 is DDP.
    if shard == 1:
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
            "parallelism.tp": size(p, "parallelism", "tensor_parallel_degree", 1, ""),
            "parallelism.cp": size(p, "parallelism", "context_parallel_degree", 1, ""),
            "parallelism.pp": size(p, "parallelism", "pipeline_parallel_degree", 1, ""),
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
    gb = (
        step // seq
        if step
        else sz.optional("training.global_batch_size", t.get("global_batch_size"))
    )
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
