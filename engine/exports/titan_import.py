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
from typing import Any

from engine.exports.common import DTYPE_OF_TORCH, Imported, as_int, balanced_or
from engine.exports.torchtitan import BASE_CONFIGS, IMPLEMENTATION, SCHEDULE
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
    for node in ast.walk(ast.parse(text)):
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
                tree.setdefault(target[1], {})[target[2]] = ast.literal_eval(node.value)
            except ValueError:
                continue
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
            except (ValueError, SyntaxError):
                value = {"true": True, "false": False}.get(raw.lower(), raw)
            tree.setdefault(sec, {})[key.replace("-", "_")] = value
    return tree


def _parse(text: str) -> tuple[Tree, str | None, str | None]:
    try:
        tree, ac, base = _recipe(text)
        if tree:
            return tree, ac, base
    except SyntaxError:
        pass
    try:
        toml = tomllib.loads(text)
        if toml:
            mode = toml.get("activation_checkpoint", {}).get("mode")
            return toml, {"none": "none", "full": "full", "selective": "selective"}.get(mode), None
    except tomllib.TOMLDecodeError:
        pass
    return _overrides(text), None, None


def import_torchtitan(text: str, base: Plan) -> Imported:
    """A plan from a torchtitan recipe / overrides / TOML over ``base``."""
    tree, ac, fn = _parse(text)
    if not tree:
        raise ValueError("no torchtitan settings found (config.<section>.<key> = …)")
    t, p = tree.get("training", {}), tree.get("parallelism", {})
    ch: dict[str, Any] = {"stack.name": "torchtitan", "method.kind": "full"}
    res: list[str] = []
    warn: list[str] = []
    arch = base.model.architecture
    if fn in _PRESET_OF:
        model = model_section_for(_PRESET_OF[fn])
        ch["model"] = model.model_dump(mode="json")
        arch = model.architecture
        res.append(f"{fn}: model {model.name} (torchtitan's registry spec)")
    elif fn:
        warn.append(f"{fn}: not a model MemPlan knows; the plan's model is kept")
    seq = as_int(t.get("max_context_length", t.get("seq_len"))) or base.batch.seq_len
    ch["batch.seq_len"] = seq
    mb_tokens = as_int(t.get("num_tokens_per_microbatch_per_dp_rank"))
    mb = mb_tokens // seq if mb_tokens else as_int(t.get("local_batch_size")) or 1
    ch["batch.micro_batch"] = mb
    ep = as_int(p.get("expert_parallel_degree")) or 1
    rep = as_int(p.get("data_parallel_replicate_degree")) or 1
    shard = as_int(p.get("data_parallel_shard_degree")) or 1
    if shard == -1:
        warn.append("data_parallel_shard_degree -1 (the rest of the world) is read as 1")
        shard = 1
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
            "parallelism.tp": as_int(p.get("tensor_parallel_degree")) or 1,
            "parallelism.cp": as_int(p.get("context_parallel_degree")) or 1,
            "parallelism.pp": as_int(p.get("pipeline_parallel_degree")) or 1,
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
        split = [sum(1 for m in part if str(m).startswith("layers.")) for part in parts]
        if sum(split) != arch.layers:
            warn.append(f"module_fqns_per_model_part holds {sum(split)} layers, not {arch.layers}")
            ch["parallelism.pp_layer_split"] = None
        elif len(split) == ch["parallelism.pp"]:
            ch["parallelism.pp_layer_split"] = balanced_or(split, arch.layers)
            ch["parallelism.virtual_stages"] = 1
        else:
            warn.append("module_fqns_per_model_part with virtual stages is not read")
    step = as_int(t.get("num_tokens_per_train_step"))
    gb = step // seq if step and step > 0 else as_int(t.get("global_batch_size"))
    per_step = mb * dp
    ga = gb // per_step if gb and gb % per_step == 0 else 1
    if gb and gb % per_step:
        warn.append(f"global batch {gb} is not a multiple of micro × DP replicas {per_step}")
    ch["batch.grad_accum"], ch["batch.global_batch"] = ga, None
    _precision(t, ch)
    off = t.get("enable_cpu_offload") is True
    ch["offload.params"] = ch["offload.optimizer"] = "cpu" if off else "none"
    impl = tree.get("optimizer", {}).get("implementation")
    if impl in _INV_IMPL:
        ch["method.optimizer.implementation"] = _INV_IMPL[impl]
    elif impl:
        warn.append(f"optimizer.implementation {impl!r} is not modelled")
    ch["workload.torch_compile"] = tree.get("compile", {}).get("enable") is True
    if ac is None:
        ac = "selective"
        res.append("activation_checkpoint not set: torchtitan's default SelectiveAC")
    ch["method.recompute.policy"] = ac
    if as_int(p.get("expert_tensor_parallel_degree")) not in (None, 1):
        warn.append("expert_tensor_parallel_degree is gone from torchtitan main; not read")
    for sec, body in (("training", t), ("parallelism", p)):
        for key in sorted(set(body) - _READ[sec] - _HARMLESS):
            warn.append(f"{sec}.{key} is not modelled")
    return Imported(with_values(base, ch), tuple(res), tuple(warn))


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
