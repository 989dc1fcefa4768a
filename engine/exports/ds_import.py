"""A plan from a DeepSpeed ``ds_config.json``, with ``"auto"`` filled as the HF Trainer does.

The HF Trainer fills ``"auto"`` in ``transformers.integrations.deepspeed``
(``HfTrainerDeepSpeedConfig.trainer_config_process`` / ``trainer_config_finalize``):
micro-batch and accumulation from the TrainingArguments, ``train_batch_size`` = world ×
micro × accumulation, ``bf16``/``fp16`` from the mixed-precision flag,
``reduce_bucket_size`` = hidden², ``stage3_prefetch_bucket_size`` = 0.9 · hidden²,
``stage3_param_persistence_threshold`` = 10 · hidden. Here the plan being imported over
plays the TrainingArguments and the model; each filled value is listed. Every key that
changes memory but is not modelled is listed as a warning, never dropped silently.
"""

from __future__ import annotations

from typing import Any

from engine.errors import field_path, quote
from engine.exports.common import DTYPE_OF_TORCH, STAGE_STRATEGY, Imported, as_int
from engine.exports.import_values import Sizes
from engine.fileio.strict_json import loads_config
from engine.plan import Plan, with_values
from engine.stacks.catalog import concrete_stack

_KNOBS = {
    "reduce_bucket_size": "ds_reduce_bucket_elements",
    "prefetch_bucket_size": "ds_prefetch_bucket_elements",
    "max_live_parameters": "ds_max_live_parameters",
    "max_reuse_distance": "ds_max_reuse_distance",
    "param_persistence_threshold": "ds_param_persistence_threshold",
    "allgather_bucket_size": "ds_allgather_bucket_elements",
    "stage3_prefetch_bucket_size": "ds_prefetch_bucket_elements",
    "stage3_max_live_parameters": "ds_max_live_parameters",
    "stage3_max_reuse_distance": "ds_max_reuse_distance",
    "stage3_param_persistence_threshold": "ds_param_persistence_threshold",
}
"""DeepSpeedZeroConfig's pydantic field names and their ``stage3_*`` aliases
(``deepspeed/runtime/zero/config.py``) are the same setting; the HF Trainer fills
``"auto"`` only under the alias names (``integrations/deepspeed.py``)."""
_ZERO_PLUS = {
    "zero_hpz_partition_size": "ZeRO++ hpZ keeps a secondary parameter partition per node",
    "zero_quantized_weights": "ZeRO++ qwZ quantizes gathered weights",
    "zero_quantized_nontrainable_weights": "ZeRO++ keeps frozen weights quantized",
    "zero_quantized_gradients": "ZeRO++ qgZ quantizes gradient communication",
    "mics_shard_size": "MiCS shards within sub-groups",
    "zenflow": "ZenFlow splits the optimizer step",
}
_HARMLESS_TOP = {
    "steps_per_print",
    "wall_clock_breakdown",
    "gradient_clipping",
    "scheduler",
    "prescale_gradients",
    "gradient_predivide_factor",
    "tensorboard",
    "wandb",
    "csv_monitor",
    "comms_logger",
    "flops_profiler",
    "dump_state",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    "checkpoint",
    "memory_breakdown",
    "log_level",
    "comms_config",
    "monitor_config",
    "timers",
    "compile",
    "seed",
    "gradient_accumulation_dtype",
}
_HARMLESS_ZERO = {
    "contiguous_gradients",
    "reduce_scatter",
    "allgather_partitions",
    "load_from_fp32_weights",
    "elastic_checkpoint",
    "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save",
    "gather_16bit_weights_on_model_save",
    "ignore_unused_parameters",
    "round_robin_gradients",
    "use_multi_rank_bucket_allreduce",
    "memory_efficient_linear",
    "override_module_apply",
    "log_trace_cache_warnings",
}

_SECTIONS = {
    "bf16",
    "bfloat16",
    "fp16",
    "data_types",
    "torch_autocast",
    "zero_optimization",
    "aio",
    "optimizer",
    "activation_checkpointing",
}
"""Keys whose value is a mapping of settings (anything else there is not read)."""


def _section(cfg: dict[str, Any], key: str) -> dict[str, Any]:
    """A nested mapping of the config, or an empty one."""
    v = cfg.get(key)
    return v if isinstance(v, dict) else {}


class _Reader:
    """Walks one ds_config, collecting plan changes, resolutions and warnings."""

    def __init__(self, cfg: dict[str, Any], base: Plan) -> None:
        self.cfg, self.base = cfg, base
        self.ch: dict[str, Any] = {}
        self.res: list[str] = []
        self.warn: list[str] = []
        self.sizes = Sizes()

    def auto(self, key: str, value: Any, why: str) -> Any:
        said = "'auto'" if self.cfg.get(key.split(".")[0]) is not None else "not set"
        if key.startswith("zero_optimization."):
            said = "'auto'"
        self.res.append(f"{key} {said} = {value} ({why})")
        return value

    def batch(self) -> None:
        c, b, par, s = self.cfg, self.base.batch, self.base.parallelism, self.sizes
        key = "train_micro_batch_size_per_gpu"
        if c.get(key) in ("auto", None):
            mb = self.auto(key, b.micro_batch, "per_device_train_batch_size")
        else:
            mb = s.size(key, c[key], b.micro_batch, "the plan's micro-batch")
        key = "gradient_accumulation_steps"
        if c.get(key) in ("auto", None):
            ga = self.auto(key, b.grad_accum, "the plan's accumulation")
        else:
            ga = s.size(key, c[key], b.grad_accum, "the plan's accumulation")
        self.ch["batch.micro_batch"], self.ch["batch.grad_accum"] = mb, ga
        if c.get("train_batch_size") in ("auto", None):
            tbs = self.auto(
                "train_batch_size",
                mb * ga * par.dp,
                "micro × accumulation × the plan's DP replicas (EP folds into DP)",
            )
        else:
            tbs = s.size(
                "train_batch_size",
                c["train_batch_size"],
                mb * ga * par.dp,
                "micro × accumulation × DP",
            )
        if tbs % (mb * ga):
            self.warn.append(
                f"train_batch_size {tbs} is not a multiple of micro {mb} × accumulation "
                f"{ga}: DeepSpeed refuses it; DP kept"
            )
            return
        self.ch["parallelism.dp"] = tbs // (mb * ga)
        self.ch["batch.global_batch"] = None
        if par.shard_group_size is not None and self.ch["parallelism.dp"] % par.shard_group_size:
            self.ch["parallelism.shard_group_size"] = None

    def _enabled(self, name: str) -> bool:
        sect = self.cfg.get(name)
        if not isinstance(sect, dict):
            return False
        on = sect.get("enabled")
        if on == "auto":
            want = "bf16" if name in ("bf16", "bfloat16") else "fp16"
            on = self.base.method.precision.compute_dtype == want
            self.res.append(f"{name}.enabled 'auto' = {str(on).lower()} (the plan's compute dtype)")
        return on is True

    def precision(self) -> None:
        c = self.cfg
        bf_name = next((n for n in ("bf16", "bfloat16") if self._enabled(n)), None)
        bf = bf_name is not None
        fp = self._enabled("fp16")
        dt = _section(c, "data_types")
        comm = c.get("communication_data_type")
        comm = comm if comm in ("fp32", "bf16", "fp16") else None
        ac = _section(c, "torch_autocast")
        ch = self.ch
        ch["method.precision.loss_scaling"] = False
        if bf or fp:
            half = "bf16" if bf else "fp16"
            sect = _section(c, bf_name) if bf_name else c["fp16"]
            master16 = bool(sect.get("bf16_master_weights_and_grads"))
            states16 = bool(sect.get("bf16_optimizer_states"))
            g = dt.get("grad_accum_dtype", half)
            if master16 and states16:
                ch["method.precision.policy"] = "pure_16bit"
                g = comm or half
            else:
                if master16:
                    self.warn.append(
                        "bf16.bf16_master_weights_and_grads without bf16_optimizer_states "
                        "(bf16 master, fp32 moments) is not modelled: counted as amp_master"
                    )
                ch["method.precision.policy"] = "amp_master"
                ch["method.precision.optimizer_state_dtype"] = "fp32"
            ch["method.precision.compute_dtype"] = half
            ch["method.precision.grad_dtype"] = g if g in ("fp32", "bf16", "fp16") else half
            if fp:
                ch["method.precision.loss_scaling"] = c["fp16"].get("loss_scale", 0) == 0
        elif ac.get("enabled") is True:
            ch["method.precision.policy"] = "autocast"
            ch["method.precision.compute_dtype"] = DTYPE_OF_TORCH.get(
                str(ac.get("dtype", "bfloat16")), "bf16"
            )
            ch["method.precision.grad_dtype"] = comm or "fp32"
        else:
            ch["method.precision.policy"] = "fp32"
            ch["method.precision.compute_dtype"] = "fp32"
            ch["method.precision.grad_dtype"] = comm or "fp32"
        for key in set(dt) - {"grad_accum_dtype"}:
            self.warn.append(f"{field_path(('data_types', key))} is not modelled")

    def zero(self) -> None:
        z = _section(self.cfg, "zero_optimization")
        stage = self.sizes.size("zero_optimization.stage", z.get("stage"), 0, "stage", 0)
        if stage not in STAGE_STRATEGY:
            self.warn.append(
                f"zero_optimization.stage {quote(stage)} is not a ZeRO stage: read as 3"
            )
        self.ch["parallelism.strategy"] = STAGE_STRATEGY.get(stage, "zero3")
        hidden = self.base.model.architecture.hidden
        hf_auto = {
            "reduce_bucket_size": (hidden * hidden, "hidden²"),
            "stage3_prefetch_bucket_size": (int(0.9 * hidden * hidden), "0.9 · hidden²"),
            "stage3_param_persistence_threshold": (10 * hidden, "10 · hidden"),
        }
        for key, knob in _KNOBS.items():
            v = z.get(key)
            if v == "auto" and key in hf_auto:
                val, why = hf_auto[key]
                v = self.auto(
                    f"zero_optimization.{key}", val, f"HF Trainer: {why}, hidden {hidden}"
                )
            elif v == "auto":
                self.warn.append(f"zero_optimization.{key} 'auto' is not filled by the HF Trainer")
                continue
            if as_int(v) is not None:
                self.ch[f"parallelism.knobs.{knob}"] = as_int(v)
        ov = z.get("overlap_comm")
        self.ch["parallelism.knobs.ds_overlap_comm"] = ov if isinstance(ov, bool) else None
        if as_int(z.get("sub_group_size")):
            self.ch["offload.sub_group_size"] = as_int(z.get("sub_group_size"))
        self.offload(z)
        for key, why in _ZERO_PLUS.items():
            v = z.get(key)
            default = v is None or v is False or v == {} or (type(v) is int and v in (1, -1))
            if not default:
                self.warn.append(f"zero_optimization.{key} = {quote(v)}: {why}; not modelled")
        known = set(_KNOBS) | set(_ZERO_PLUS) | _HARMLESS_ZERO
        known |= {"stage", "overlap_comm", "sub_group_size", "offload_optimizer", "offload_param"}
        known |= {"cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory"}
        for key in sorted(k for k in set(z) - known if not k.startswith("_")):
            self.warn.append(f"{field_path(('zero_optimization', key))} is not modelled")

    def offload(self, z: dict[str, Any]) -> None:
        for flag, sect in (
            ("cpu_offload", "offload_optimizer"),
            ("cpu_offload_param", "offload_param"),
        ):
            if z.get(flag) is True and not isinstance(z.get(sect), dict):
                self.warn.append(
                    f"zero_optimization.{flag} is deprecated (DeepSpeed reads it as "
                    f"{sect}.device cpu): imported as that"
                )
                z = {**z, sect: {"device": "cpu"}}
        if z.get("cpu_offload_use_pin_memory") is True:
            self.warn.append("cpu_offload_use_pin_memory is deprecated: read as pin_memory")
        for sect, field, prefix in (
            ("offload_optimizer", "optimizer", "optimizer"),
            ("offload_param", "params", "param"),
        ):
            o = z.get(sect)
            device = o.get("device", "none") if isinstance(o, dict) else "none"
            device = device if device in ("none", "cpu", "nvme") else "none"
            self.ch[f"offload.{field}"] = device
            if device == "none" or not isinstance(o, dict):
                continue
            if "pin_memory" in o:
                self.ch["offload.pin_memory"] = bool(o["pin_memory"])
            if as_int(o.get("buffer_count")):
                self.ch[f"offload.{prefix}_buffer_count"] = as_int(o["buffer_count"])
            if field == "params" and as_int(o.get("buffer_size")):
                self.ch["offload.param_buffer_elements"] = as_int(o["buffer_size"])
            if field == "params" and o.get("max_in_cpu") is not None:
                self.warn.append("offload_param.max_in_cpu is not modelled")
            if field == "optimizer" and o.get("ratio", 1.0) != 1.0:
                self.warn.append("offload_optimizer.ratio (partial offload) is not modelled")

    def aio(self) -> None:
        a = self.cfg.get("aio")
        if not isinstance(a, dict):
            return
        if as_int(a.get("block_size")):
            self.ch["offload.aio_block_size"] = as_int(a["block_size"])
        if as_int(a.get("queue_depth")):
            self.ch["offload.aio_queue_depth"] = as_int(a["queue_depth"])

    def optimizer(self) -> None:
        o = self.cfg.get("optimizer")
        if not isinstance(o, dict):
            return
        kind = str(o.get("type", "")).lower()
        params = _section(o, "params")
        if kind in ("adam", "adamw"):
            self.ch["method.optimizer.name"] = "adamw"
            foreach = params.get("torch_adam") is True
            self.ch["method.optimizer.implementation"] = "foreach" if foreach else "fused"
        elif kind == "lion":
            self.ch["method.optimizer.name"] = "lion"
            self.ch["method.optimizer.implementation"] = "fused"
        else:
            self.warn.append(
                f"optimizer type {quote(o.get('type'))} is not modelled; the plan's kept"
            )

    def recompute(self) -> None:
        a = self.cfg.get("activation_checkpointing")
        if not isinstance(a, dict):
            return
        self.ch["method.recompute.policy"] = "offload" if a.get("cpu_checkpointing") else "full"
        if a.get("partition_activations"):
            self.warn.append(
                "activation_checkpointing.partition_activations splits checkpoints over "
                "model-parallel ranks; not modelled"
            )

    def rest(self) -> None:
        known = _SECTIONS | {
            "train_batch_size",
            "train_micro_batch_size_per_gpu",
            "gradient_accumulation_steps",
            "communication_data_type",
        }
        for key in sorted(_SECTIONS):
            if key in self.cfg and not isinstance(self.cfg[key], dict):
                shown = quote(self.cfg[key])
                self.warn.append(f"{key} = {shown} is not a mapping of settings: not read")
        for key in sorted(set(self.cfg) - known - _HARMLESS_TOP):
            if key.startswith("_"):  # "_comment" and the like: notes, not settings
                continue
            self.warn.append(f"{field_path((key,))} is not modelled")
        stack = self.base.stack.name
        runs = concrete_stack(stack, self.ch["parallelism.strategy"], self.base.method.kind)
        if self.ch["parallelism.strategy"] == "ddp":
            # ZeRO stage 0: DeepSpeed's engine all-reduces whole gradients over whole
            # replicas (DDP's memory); the HF Trainer runs it, or a plain script
            self.ch["stack.name"] = "hf_trainer" if runs == "hf_trainer" else "pytorch"
            self.res.append("zero_optimization.stage 0: no partitioning, counted as DDP")
            return
        self.ch["stack.name"] = stack if runs in ("deepspeed", "hf_trainer") else "deepspeed"


def import_deepspeed_dict(cfg: dict[str, Any], base: Plan) -> Imported:
    r = _Reader(cfg, base)
    r.batch()
    r.precision()
    r.zero()
    r.aio()
    r.optimizer()
    r.recompute()
    r.rest()
    return Imported(with_values(base, r.ch), tuple(r.res), (*r.sizes.warnings, *r.warn))


def import_deepspeed(text: str, base: Plan) -> Imported:
    """A plan from ds_config.json text over ``base`` (ValueError on bad JSON)."""
    cfg = loads_config(text)
    if not isinstance(cfg, dict):
        raise ValueError("a ds_config must be a JSON object")
    return import_deepspeed_dict(cfg, base)
