"""A plan from an accelerate config (YAML, or JSON), over a base plan.

The inverse of :mod:`engine.exports.accelerate`, and what ``accelerate config`` writes by
hand: the DeepSpeed plugin keys (``zero_stage``, offload devices, ``zero3_init_flag``,
``gradient_accumulation_steps``) or a ``deepspeed_config_file`` read as a ds_config; the
FSDP options; ``parallelism_config``. ``fsdp_offload_params`` is FSDP's CPUOffload,
which moves parameters, gradients and optimizer state: both placements become cpu.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from engine.errors import field_path, quote
from engine.exports.accelerate import FSDP1_STRATEGY, PREFETCH, STATE_DICT
from engine.exports.common import STAGE_STRATEGY, Imported
from engine.exports.ds_import import import_deepspeed
from engine.exports.flat_yaml import read_flat_yaml
from engine.exports.import_values import Sizes
from engine.fileio.strict_json import check_tree, loads_config
from engine.plan import Plan, with_values

_INV_FSDP1 = {v: k for k, v in FSDP1_STRATEGY.items()}
_INV_PREFETCH = {v: k for k, v in PREFETCH.items()}
_INV_STATE = {v: k for k, v in STATE_DICT.items()}
_PC = "parallelism_config_"
_FSDP_READ = {
    "fsdp_version",
    "fsdp_reshard_after_forward",
    "fsdp_sharding_strategy",
    "fsdp_backward_prefetch",
    "fsdp_offload_params",
    "fsdp_activation_checkpointing",
    "fsdp_state_dict_type",
    "fsdp_cpu_ram_efficient_loading",
    "fsdp_auto_wrap_policy",
    "fsdp_transformer_layer_cls_to_wrap",
    "fsdp_use_orig_params",
    "fsdp_sync_module_states",
    "fsdp_min_num_params",
}
"""fsdp_config keys read, or that change no memory (wrapping names the same units)."""


_NOT_ACCELERATE = (
    "it is YAML but not an accelerate config (no distributed_type, deepspeed_config, "
    "fsdp_config or num_processes key): a trainer's recipe YAML (axolotl, LLaMA-Factory, "
    "TRL) is not read; import the accelerate or DeepSpeed config it launches with"
)


class _Reader:
    def __init__(self, cfg: dict[str, Any], base: Plan) -> None:
        self.cfg, self.base = cfg, base
        self.ch: dict[str, Any] = {"stack.name": "hf_trainer"}
        self.res: list[str] = []
        self.warn: list[str] = []
        self.sizes = Sizes()

    def section(self, key: str) -> dict[str, Any]:
        """A nested mapping of the config; anything else is named and read as empty."""
        value = self.cfg.get(key)
        if value is None or value == "":
            return {}
        if not isinstance(value, dict):
            self.warn.append(f"{key} = {quote(value)} is not a mapping of settings: not read")
            return {}
        return value

    def world(self, tp: int, cp: int) -> None:
        n = self.sizes.optional("num_processes", self.cfg.get("num_processes"))
        if n is None:
            return
        rest = tp * cp
        if n % rest:
            self.warn.append(f"num_processes {n} is not a multiple of TP×CP {rest}")
            return
        self.ch["parallelism.dp"] = n // rest
        self.ch["batch.global_batch"] = None

    def precision(self, fsdp: bool) -> None:
        mp = self.cfg.get("mixed_precision", "no")
        if mp not in ("bf16", "fp16", "no"):
            self.warn.append(f"mixed_precision {quote(mp)} is not modelled; read as no")
            mp = "no"
        half = None if mp == "no" else mp
        ch = self.ch
        ch["method.precision.compute_dtype"] = half or "fp32"
        ch["method.precision.grad_dtype"] = half or "fp32"
        ch["method.precision.loss_scaling"] = mp == "fp16"
        if half is None:
            ch["method.precision.policy"] = "fp32"
        elif fsdp and self.base.method.kind in ("lora", "qlora"):
            # accelerate's FSDP upcasts the trainable parameters — peft's adapters, already
            # fp32 — so the base keeps the HF Trainer stack's default (the export agrees)
            ch["method.precision.policy"] = "auto"
            self.res.append("LoRA under FSDP: the base model's dtype is the stack default")
        else:
            ch["method.precision.policy"] = "autocast" if fsdp else "pure_16bit"

    def deepspeed(self, companions: Mapping[str, str]) -> Plan | None:
        ds = self.section("deepspeed_config")
        path = ds.get("deepspeed_config_file")
        plan = None
        if path:
            name = PurePath(str(path)).name
            text = companions.get(str(path), companions.get(name))
            if text is None and "zero_stage" not in ds:
                raise ValueError(
                    f"its deepspeed_config_file {quote(path)} is not beside it, and the ZeRO "
                    "stage is in that file: import the ds_config itself, or put it beside"
                )
            if text is None:
                self.warn.append(
                    f"deepspeed_config_file {quote(path)} was not found: plugin keys only"
                )
            else:
                try:
                    got = import_deepspeed(text, self.base)
                except ValueError as exc:
                    raise ValueError(f"its deepspeed_config_file {name}: {exc}") from None
                self.res += [f"{name}: {r}" for r in got.resolutions]
                self.warn += [f"{name}: {w}" for w in got.warnings]
                plan = got.plan
        if plan is None:
            stage = self.sizes.size("zero_stage", ds.get("zero_stage"), 0, "stage", 0)
            if stage not in STAGE_STRATEGY:
                self.warn.append(
                    f"deepspeed_config.zero_stage {quote(stage)} is not a ZeRO stage: read as 3"
                )
            self.ch["parallelism.strategy"] = STAGE_STRATEGY.get(stage, "zero3")
            ga = self.sizes.optional(
                "gradient_accumulation_steps", ds.get("gradient_accumulation_steps")
            )
            if ga:
                self.ch["batch.grad_accum"] = ga
            for key, field in (
                ("offload_optimizer_device", "optimizer"),
                ("offload_param_device", "params"),
            ):
                dev = ds.get(key, "none")
                self.ch[f"offload.{field}"] = dev if dev in ("cpu", "nvme") else "none"
            self.precision(fsdp=False)
            if self.ch["method.precision.policy"] == "pure_16bit":
                self.ch["method.precision.policy"] = "amp_master"  # DeepSpeed's bf16 mode
        stage3 = (plan or self.base).parallelism.strategy == "zero3"
        if self.ch.get("parallelism.strategy") == "zero3":
            stage3 = True
        init = ds.get("zero3_init_flag")
        if stage3:
            self.ch["host.model_init"] = "zero_init" if init is True else "full_copy_per_rank"
        else:
            self.ch["host.model_init"] = "full_copy_per_rank"
        return plan

    def ds_parallelism(self) -> None:
        """``parallelism_config`` beside DeepSpeed: Ulysses sequence parallelism (TRL's
        ALST configs) splits each sequence over ``sp_size`` ranks, which MemPlan does not
        model; sizes of 1 change nothing."""
        pc = {str(k).removeprefix(_PC): v for k, v in self.section("parallelism_config").items()}
        for key in sorted(pc):
            if key.endswith("_size") and pc[key] not in (None, 1, "1"):
                self.warn.append(
                    f"parallelism_config {key} {quote(pc[key])} under DeepSpeed is not "
                    "modelled: every rank is counted with whole sequences and ZeRO over all"
                )

    def fsdp1_strategy(self, f: dict[str, Any]) -> str:
        """FSDP1's ShardingStrategy: ``fsdp_sharding_strategy`` (deprecated) or else
        ``fsdp_reshard_after_forward`` — a strategy name or its number (1-5), what
        ``accelerate config`` writes now; accelerate refuses true/false with FSDP1
        (``FullyShardedDataParallelPlugin.__post_init__``)."""
        raw = f.get("fsdp_sharding_strategy")
        key = "fsdp_sharding_strategy"
        if raw is None:
            raw, key = (
                f.get("fsdp_reshard_after_forward", "FULL_SHARD"),
                "fsdp_reshard_after_forward",
            )
        if isinstance(raw, bool) or str(raw).lower() in ("true", "false"):
            raise ValueError(
                f"fsdp_config.{key} {quote(raw)} is a bool, which accelerate refuses with "
                "fsdp_version 1 (it takes FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD)"
            )
        text = str(raw).upper()
        names = list(FSDP1_STRATEGY.values())
        if text.isdigit() and 1 <= int(text) <= len(names):
            text = names[int(text) - 1]  # ShardingStrategy's numbers, FULL_SHARD = 1
        if text not in _INV_FSDP1:
            raise ValueError(f"fsdp_config.{key} {quote(raw)} is not an FSDP sharding strategy")
        return _INV_FSDP1[text]

    def fsdp(self) -> None:
        f = self.section("fsdp_config")
        ch, sz = self.ch, self.sizes
        version = sz.size("fsdp_version", f.get("fsdp_version"), 1, "")
        pc = {str(k).removeprefix(_PC): v for k, v in self.section("parallelism_config").items()}
        replicate = sz.size("dp_replicate_size", pc.get("dp_replicate_size"), 1, "")
        shard = sz.optional("dp_shard_size", pc.get("dp_shard_size"))
        if version == 2:
            ch["parallelism.strategy"] = "fsdp2_hsdp" if replicate > 1 else "fsdp2"
            ch["parallelism.shard_group_size"] = shard if replicate > 1 else None
            raf = f.get("fsdp_reshard_after_forward", True)
            ch["parallelism.knobs.fsdp_reshard_after_forward"] = (
                raf if isinstance(raf, bool) else str(raf).lower() == "true"
            )
        else:
            ch["parallelism.strategy"] = self.fsdp1_strategy(f)
            ch["parallelism.shard_group_size"] = None
            bp = str(f.get("fsdp_backward_prefetch", "BACKWARD_PRE")).upper()
            ch["parallelism.knobs.fsdp1_backward_prefetch"] = _INV_PREFETCH.get(bp, "backward_pre")
        tp = sz.size("tp_size", pc.get("tp_size"), 1, "")
        cp = sz.size("cp_size", pc.get("cp_size"), 1, "")
        ch["parallelism.tp"], ch["parallelism.cp"] = tp, cp
        for key in set(pc) - {"dp_replicate_size", "dp_shard_size", "tp_size", "cp_size"}:
            if pc[key] not in (None, 1, "none"):
                self.warn.append(f"parallelism_config {field_path((key,))} is not modelled")
        self.world(tp, cp)
        off = f.get("fsdp_offload_params") is True or str(f.get("fsdp_offload_params")) == "true"
        ch["offload.params"] = ch["offload.optimizer"] = "cpu" if off else "none"
        if off:
            self.res.append(
                "fsdp_offload_params: FSDP's CPUOffload moves parameters, gradients and "
                "optimizer state: offload.params and offload.optimizer = cpu"
            )
        ch["method.recompute.policy"] = (
            "full" if f.get("fsdp_activation_checkpointing") is True else "none"
        )
        sd = str(f.get("fsdp_state_dict_type", "SHARDED_STATE_DICT")).upper()
        ch["checkpoint.format"] = _INV_STATE.get(sd, "sharded")
        efficient = f.get("fsdp_cpu_ram_efficient_loading", True)
        ch["host.model_init"] = "meta" if efficient is True else "full_copy_per_rank"
        for key in sorted(set(f) - _FSDP_READ):
            if f[key] not in (None, False):
                self.warn.append(f"{field_path(('fsdp_config', key))} is not modelled")
        self.precision(fsdp=True)


def import_accelerate(
    text: str, base: Plan, companions: Mapping[str, str] | None = None
) -> Imported:
    """A plan from an accelerate config over ``base``; ``companions`` maps the name of a
    ``deepspeed_config_file`` to its text."""
    if text.lstrip().startswith("{"):
        cfg = loads_config(text)
    else:
        try:
            cfg = read_flat_yaml(text)
        except ValueError:
            if "distributed_type" not in text:
                raise ValueError(_NOT_ACCELERATE) from None
            raise
        check_tree(cfg)
    if not isinstance(cfg, dict):
        raise ValueError("an accelerate config must be a mapping")
    if not {"distributed_type", "deepspeed_config", "fsdp_config", "num_processes"} & set(cfg):
        raise ValueError(_NOT_ACCELERATE)
    # accelerate has no pipeline or expert parallelism: those are 1
    flat = {
        "parallelism.pp": 1,
        "parallelism.ep": 1,
        "parallelism.pp_layer_split": None,
        "parallelism.virtual_stages": 1,
    }
    base = with_values(base, flat)
    r = _Reader(cfg, base)
    dt = cfg.get("distributed_type", "NO")
    plan = base
    if dt == "DEEPSPEED":
        plan = r.deepspeed(companions or {}) or base
        r.ch.setdefault("parallelism.tp", 1)
        r.ch.setdefault("parallelism.cp", 1)
        if plan is base:
            r.world(1, 1)
        r.ds_parallelism()
    elif dt == "FSDP":
        r.fsdp()
    elif dt in ("MULTI_GPU", "NO"):
        r.ch["parallelism.strategy"] = "ddp"
        r.ch["parallelism.tp"] = r.ch["parallelism.cp"] = 1
        r.world(1, 1)
        if dt == "NO":  # accelerate launches one process: no distributed training
            r.ch["parallelism.dp"], r.ch["batch.global_batch"] = 1, None
            r.res.append("distributed_type NO: one process, DP 1")
        r.precision(fsdp=False)
    else:
        r.warn.append(f"distributed_type {quote(dt)} is not modelled; the plan's strategy is kept")
    return Imported(with_values(plan, r.ch), tuple(r.res), (*r.sizes.warnings, *r.warn))
