"""A plan from a Megatron-LM argument list or launch script.

Reads ``--flag value`` tokens (bare flags are True) after the training script on the
``torchrun`` / ``python`` line, or a bare argument list; ``--nproc_per_node`` ×
``--nnodes`` give the world, and so DP = world ÷ (TP × PP × CP × EP). Flags not given
take Megatron's own defaults (``arguments.py``), which is why biases and dropout read
as Megatron builds them. Flags that change memory but are not modelled are warned.
"""

from __future__ import annotations

import shlex
from typing import Any

from engine.exports.common import Imported, as_int, balanced_or
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan, with_values

_UNMODELLED = (
    "--fp8-format",
    "--fp8",
    "--recompute-modules",
    "--moe-layer-recompute",
    "--overlap-param-gather",
    "--overlap-grad-reduce",
    "--use-custom-fsdp",
    "--cpu-offloading",
    "--fine-grained-activation-offloading",
    "--use-torch-fsdp2",
    "--use-megatron-fsdp",
    "--moe-token-dispatcher-type",
)


def parse_args(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Megatron flags, launcher flags) from a script or an argument list."""
    lines = [ln.split("#")[0] for ln in text.replace("\\\n", " ").splitlines()]
    tokens: list[str] = []
    for ln in lines:
        if "--" in ln or tokens:
            tokens += shlex.split(ln)
    launcher: dict[str, Any] = {}
    start = next((i + 1 for i, t in enumerate(tokens) if t.endswith(".py")), 0)
    _pairs(tokens[:start], launcher)
    args: dict[str, Any] = {}
    _pairs(tokens[start:], args)
    return args, launcher


def _pairs(tokens: list[str], out: dict[str, Any]) -> None:
    i = 0
    while i < len(tokens):
        key = tokens[i]
        if not key.startswith("--"):
            i += 1
            continue
        key, eq, inline = key.partition("=")
        if eq:
            out[key] = _value(inline)
            i += 1
        elif i + 1 < len(tokens) and not tokens[i + 1].startswith("--"):
            out[key] = _value(tokens[i + 1])
            i += 2
        else:
            out[key] = True
            i += 1


def _value(raw: str) -> Any:
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _split(args: dict[str, Any], pp: int, layers: int) -> tuple[int, ...] | None:
    layout = args.get("--pipeline-model-parallel-layout")
    if isinstance(layout, str):
        stages = [s.count("t") for s in layout.split("|")]
        return balanced_or(stages, layers) if len(stages) == pp else None
    first = as_int(args.get("--decoder-first-pipeline-num-layers"))
    last = as_int(args.get("--decoder-last-pipeline-num-layers"))
    if (first is None and last is None) or pp == 1:
        return None
    first = first if first is not None else 0
    last = last if last is not None else 0
    if pp == 2:
        return balanced_or([first, last], layers)
    mid = (layers - first - last) // (pp - 2)
    return balanced_or([first] + [mid] * (pp - 2) + [last], layers)


def _arch(args: dict[str, Any], base: ArchitectureSpec) -> dict[str, Any]:
    a = args
    heads = as_int(a.get("--num-attention-heads")) or base.heads
    hidden = as_int(a.get("--hidden-size")) or base.hidden
    biased = "--disable-bias-linear" not in a
    norm = "layernorm" if str(a.get("--normalization", "LayerNorm")) == "LayerNorm" else "rmsnorm"
    out: dict[str, Any] = {
        **base.model_dump(mode="json"),
        "hidden": hidden,
        "layers": as_int(a.get("--num-layers")) or base.layers,
        "heads": heads,
        "kv_heads": as_int(a.get("--num-query-groups"))
        if "--group-query-attention" in a
        else heads,
        "head_dim": as_int(a.get("--kv-channels")),
        "intermediate": as_int(a.get("--ffn-hidden-size")) or 4 * hidden,
        "vocab": as_int(a.get("--vocab-size")) or base.vocab,
        "max_position": as_int(a.get("--max-position-embeddings")) or base.max_position,
        "tied_embeddings": "--untie-embeddings-and-output-weights" not in a,
        "mlp": "swiglu" if "--swiglu" in a else "gelu",
        "norm": norm,
        "norm_bias": norm == "layernorm",
        "qkv_bias": biased or "--add-qkv-bias" in a,
        "o_bias": biased,
        "mlp_bias": biased,
        "lm_head_bias": False,
        "qk_norm": "--qk-layernorm" in a,
        "sandwich_norm": False,
        "residual": "sequential",
        "position": "learned"
        if a.get("--position-embedding-type", "learned_absolute") == "learned_absolute"
        else "rotary",
        "mtp_layers": as_int(a.get("--mtp-num-layers")) or 0,
        "moe": None,
        "mla": None,
    }
    if "--num-experts" in a:
        experts = as_int(a["--num-experts"]) or 1
        shared = as_int(a.get("--moe-shared-expert-intermediate-size"))
        width = as_int(a.get("--moe-ffn-hidden-size")) or out["intermediate"]
        dense, step = _moe_layers(str(a.get("--moe-layer-freq", "1")), out["layers"])
        out["moe"] = {
            "num_experts": experts,
            "top_k": as_int(a.get("--moe-router-topk")) or 2,
            "expert_intermediate": width,
            "shared_experts": 1 if shared else 0,
            "shared_intermediate": shared,
            "first_dense_layers": dense,
            "router_bias": "--moe-router-enable-expert-bias" in a,
            "capacity_factor": float(a.get("--moe-expert-capacity-factor", 1.0)),
            "layer_step": step,
            "shared_expert_gate": "--moe-shared-expert-gate" in a,
        }
    if "--multi-latent-attention" in a:
        out["mla"] = {
            "q_lora_rank": as_int(a.get("--q-lora-rank")),
            "kv_lora_rank": as_int(a.get("--kv-lora-rank")) or 512,
            "qk_nope_head_dim": as_int(a.get("--qk-head-dim")) or 128,
            "qk_rope_head_dim": as_int(a.get("--qk-pos-emb-head-dim")) or 64,
            "v_head_dim": as_int(a.get("--v-head-dim")) or 128,
        }
    return out


def _moe_layers(freq: str, layers: int) -> tuple[int, int]:
    """(first_dense_layers, layer_step) of a ``--moe-layer-freq`` list (or an int k:
    every k-th layer)."""
    if "," not in freq:
        k = as_int(freq) or 1
        return 0, k
    pattern = [int(c) for c in freq.strip("[]() ").split(",")]
    for step in range(1, layers + 1):
        for dense in range(layers + 1):
            if all(bool(v) == (i >= dense and (i + 1) % step == 0) for i, v in enumerate(pattern)):
                return dense, step
    return 0, 1


def _precision(a: dict[str, Any], ch: dict[str, Any]) -> None:
    half = "bf16" if "--bf16" in a else "fp16" if "--fp16" in a else None
    ch["method.precision.policy"] = "amp_master" if half else "fp32"
    ch["method.precision.compute_dtype"] = half or "fp32"
    ch["method.precision.loss_scaling"] = half == "fp16" and a.get("--loss-scale") != 1.0
    if half:
        bf16_buffer = "bf16" if "--grad-reduce-in-bf16" in a else "fp32"
        ch["method.precision.grad_dtype"] = str(a.get("--main-grads-dtype", bf16_buffer))
        # the knob only decides 16-bit main grads over fp32 moments (16-bit moments need
        # the precision-aware optimizer anyway: the ledger reads them so)
        ch["method.optimizer.precision_aware"] = (
            "--use-precision-aware-optimizer" in a
            and "--main-grads-dtype" in a
            and str(a.get("--exp-avg-dtype", "fp32")) == "fp32"
        )
        ch["method.precision.optimizer_state_dtype"] = str(a.get("--exp-avg-dtype", "fp32"))


def import_megatron(text: str, base: Plan) -> Imported:
    """A plan from Megatron-LM arguments over ``base``."""
    a, launcher = parse_args(text)
    if not a:
        raise ValueError("no Megatron-LM --flags found")
    warn: list[str] = []
    res: list[str] = []
    arch = _arch(a, base.model.architecture)
    tp = as_int(a.get("--tensor-model-parallel-size")) or 1
    pp = as_int(a.get("--pipeline-model-parallel-size")) or 1
    cp = as_int(a.get("--context-parallel-size")) or 1
    ep = as_int(a.get("--expert-model-parallel-size")) or 1
    ch: dict[str, Any] = {
        "stack.name": "megatron_core",
        "method.kind": "full",
        "model.architecture": arch,
        "batch.seq_len": as_int(a.get("--seq-length")) or base.batch.seq_len,
        "batch.micro_batch": as_int(a.get("--micro-batch-size")) or 1,
        "parallelism.tp": tp,
        "parallelism.pp": pp,
        "parallelism.cp": cp,
        "parallelism.ep": ep,
        "parallelism.expert_tp": as_int(a.get("--expert-tensor-parallel-size")) or 1,
        "parallelism.sequence_parallel": "--sequence-parallel" in a,
        "parallelism.virtual_stages": as_int(a.get("--num-virtual-stages-per-pipeline-rank")) or 1,
        "parallelism.pp_layer_split": _split(a, pp, arch["layers"]),
        "parallelism.strategy": "megatron_distopt" if "--use-distributed-optimizer" in a else "ddp",
        "parallelism.shard_group_size": None,
    }
    per_chunk = as_int(a.get("--num-layers-per-virtual-pipeline-stage"))
    if per_chunk and pp > 1:
        ch["parallelism.virtual_stages"] = max(1, arch["layers"] // (pp * per_chunk))
    interleaved = ch["parallelism.virtual_stages"] > 1
    ch["parallelism.pp_schedule"] = "interleaved_1f1b" if interleaved else "1f1b"
    world = (as_int(launcher.get("--nproc_per_node")) or 0) * (
        as_int(launcher.get("--nnodes")) or 1
    )
    dp = base.parallelism.dp
    if world and world % (tp * pp * cp) == 0:
        dp = world // (tp * pp * cp)  # EP folds over TP × CP × DP (Megatron-Core)
    else:
        res.append(f"no torchrun world size: DP {dp} kept from the plan")
    ch["parallelism.dp"] = dp
    mb = ch["batch.micro_batch"]
    gb = as_int(a.get("--global-batch-size")) or mb * dp
    if gb % (mb * dp):
        warn.append(f"--global-batch-size {gb} is not a multiple of micro × DP {mb * dp}")
    ch["batch.grad_accum"], ch["batch.global_batch"] = max(1, gb // (mb * dp)), None
    _precision(a, ch)
    rg = a.get("--recompute-granularity")
    ch["method.recompute.policy"] = {"full": "full", "selective": "selective"}.get(str(rg), "none")
    if rg == "full" and (
        a.get("--recompute-method") != "uniform" or a.get("--recompute-num-layers") != 1
    ):
        warn.append("recompute other than uniform / 1 layer is read as full")
    opt = a.get("--optimizer", "adam")
    ch["method.optimizer.name"] = "sgd" if opt == "sgd" else "adamw"
    ch["method.optimizer.implementation"] = "fused"
    ch["offload.optimizer"] = "cpu" if "--optimizer-cpu-offload" in a else "none"
    ch["offload.params"] = "none"
    if float(a.get("--optimizer-offload-fraction", 1.0)) != 1.0:
        warn.append("--optimizer-offload-fraction below 1 (partial offload) is not modelled")
    hidden, attn = (float(a.get(k, 0.1)) for k in ("--hidden-dropout", "--attention-dropout"))
    ch["method.dropout"] = hidden  # Megatron's default 0.1 when unset: 1-byte masks kept
    if (attn > 0) != (hidden > 0):
        warn.append(f"--attention-dropout {attn} read as --hidden-dropout {hidden}")
    for key in _UNMODELLED:
        if key in a:
            warn.append(f"{key} is not modelled")
    return Imported(with_values(base, ch), tuple(res), tuple(warn))
