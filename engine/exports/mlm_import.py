"""A plan from a Megatron-LM argument list or launch script.

Reads ``--flag value`` tokens (bare flags are True) after the training script on the
``torchrun`` / ``python`` line, or a bare argument list; ``--nproc_per_node`` ×
``--nnodes`` give the world, and so DP = world ÷ (TP × PP × CP × EP). Flags not given
take Megatron's own defaults (``arguments.py``), which is why biases and dropout read
as Megatron builds them. Flags that change memory but are not modelled are warned.
"""

from __future__ import annotations

from typing import Any

from engine.errors import quote
from engine.exports.common import Imported, as_int, balanced_or
from engine.exports.import_values import Sizes
from engine.exports.mlm_pattern import PatternError, dense_and_step, moe_pattern
from engine.exports.mlm_vocab import padded_vocab
from engine.exports.shell_script import read_script, training_command
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan, with_values

_UNMODELLED = (
    "--fp8-param-gather",
    "--cross-entropy-loss-fusion",
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


MAX_LAYERS = 10_000
"""The most decoder layers a plan holds (``ArchitectureSpec.layers``): more is refused by
the plan, so no per-layer list is built for it here."""

MAX_LINE_CHARS = 40_000
"""The longest command line read (a 10,000-layer ``--moe-layer-freq`` list written
``[1, 1, …]`` is 30,000 characters); shlex takes quadratic time in a token's length, so
a longer line is refused (a 1 MiB script of such lines then reads in about a second)."""


def parse_script(text: str) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(Megatron flags, launcher flags, the script variables filled in) from a script or
    an argument list (:mod:`engine.exports.shell_script` reads its bash)."""
    args, launcher, filled, _ = _parse(text)
    return args, launcher, filled


def _parse(text: str) -> tuple[dict[str, Any], dict[str, Any], list[str], int]:
    for ln in text.splitlines():
        if len(ln) > MAX_LINE_CHARS:  # shlex is quadratic in a token's length
            raise ValueError(
                f"a line of {len(ln):,} characters is longer than any launch command "
                f"(at most {MAX_LINE_CHARS:,})"
            )
    script = read_script(text)
    words, launch, used = training_command(script)
    launcher: dict[str, Any] = {}
    _pairs(launch, launcher)
    args: dict[str, Any] = {}
    _pairs(words, args)
    filled = sorted(u for u in used if not u.split("=")[0].isdigit() or "default" in u)
    return args, launcher, filled, script.skipped_else


def parse_args(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(Megatron flags, launcher flags) from a script or an argument list."""
    args, launcher, _ = parse_script(text)
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
    if layers > MAX_LAYERS or pp > layers:
        return None  # the plan refuses these itself; no per-stage list is built
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


def _float(a: dict[str, Any], key: str, default: float, warn: list[str]) -> float:
    """A real-valued flag; one that is not a finite number warns and takes ``default``."""
    raw = a.get(key, default)
    try:
        value = float(raw)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(raw, bool) or value != value or value in (float("inf"), float("-inf")):
        warn.append(f"{key} {quote(raw)} is not a number: Megatron's default {default} used")
        return default
    return value


def _arch(a: dict[str, Any], base: ArchitectureSpec, s: Sizes, warn: list[str]) -> dict[str, Any]:
    heads = s.size(
        "--num-attention-heads", a.get("--num-attention-heads"), base.heads, "the plan's"
    )
    hidden = s.size("--hidden-size", a.get("--hidden-size"), base.hidden, "the plan's")
    biased = "--disable-bias-linear" not in a
    norm = "layernorm" if str(a.get("--normalization", "LayerNorm")) == "LayerNorm" else "rmsnorm"
    groups = s.size("--num-query-groups", a.get("--num-query-groups"), heads, "the head count")
    out: dict[str, Any] = {
        **base.model_dump(mode="json"),
        "hidden": hidden,
        "layers": s.size("--num-layers", a.get("--num-layers"), base.layers, "the plan's"),
        "heads": heads,
        "kv_heads": groups if "--group-query-attention" in a else heads,
        "head_dim": s.optional("--kv-channels", a.get("--kv-channels")),
        "intermediate": s.size(
            "--ffn-hidden-size", a.get("--ffn-hidden-size"), 4 * hidden, "4 × hidden ="
        ),
        "vocab": base.vocab,  # set by _vocab once TP is known
        "max_position": s.size(
            "--max-position-embeddings",
            a.get("--max-position-embeddings"),
            base.max_position,
            "the plan's",
        ),
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
        "position": "rotary"
        if "--use-rotary-position-embeddings" in a
        or a.get("--position-embedding-type", "learned_absolute") != "learned_absolute"
        else "learned",
        "mtp_layers": s.size("--mtp-num-layers", a.get("--mtp-num-layers"), 0, "", 0),
        "moe": None,
        "mla": None,
    }
    if "--num-experts" in a:
        shared = s.optional(
            "--moe-shared-expert-intermediate-size", a.get("--moe-shared-expert-intermediate-size")
        )
        dense, step = _moe_layers(a.get("--moe-layer-freq", 1), out["layers"], warn)
        out["moe"] = {
            "num_experts": s.size("--num-experts", a["--num-experts"], 1, ""),
            "top_k": s.size("--moe-router-topk", a.get("--moe-router-topk"), 2, "Megatron's"),
            "expert_intermediate": s.size(
                "--moe-ffn-hidden-size", a.get("--moe-ffn-hidden-size"), out["intermediate"], ""
            ),
            "shared_experts": 1 if shared else 0,
            "shared_intermediate": shared,
            "first_dense_layers": dense,
            "router_bias": "--moe-router-enable-expert-bias" in a,
            "capacity_factor": _float(a, "--moe-expert-capacity-factor", 1.0, warn),
            "layer_step": step,
            "shared_expert_gate": "--moe-shared-expert-gate" in a,
        }
    if "--multi-latent-attention" in a:
        out["mla"] = {
            "q_lora_rank": s.optional("--q-lora-rank", a.get("--q-lora-rank")),
            "kv_lora_rank": s.size("--kv-lora-rank", a.get("--kv-lora-rank"), 512, "Megatron's"),
            "qk_nope_head_dim": s.size("--qk-head-dim", a.get("--qk-head-dim"), 128, "Megatron's"),
            "qk_rope_head_dim": s.size(
                "--qk-pos-emb-head-dim", a.get("--qk-pos-emb-head-dim"), 64, "Megatron's"
            ),
            "v_head_dim": s.size("--v-head-dim", a.get("--v-head-dim"), 128, "Megatron's"),
        }
    return out


def _moe_layers(freq: Any, layers: int, warn: list[str]) -> tuple[int, int]:
    """(first_dense_layers, layer_step) of a ``--moe-layer-freq`` (see
    :mod:`engine.exports.mlm_pattern`); a pattern MemPlan cannot place exactly is
    counted as the same number of MoE layers, the last ones, with a warning."""
    if layers > MAX_LAYERS:
        return 0, 1  # the plan refuses the layer count itself
    shown = quote(freq)
    if isinstance(freq, str) and freq.startswith("$"):
        # slime builds it with a loop whose body branches on the index (dense for the
        # first K layers): no bounded evaluation without running the script's `if`s
        warn.append(
            f"--moe-layer-freq {shown} is built at run time (a loop or command MemPlan "
            f"does not run): assumed MoE in all {layers} layers, the largest expert memory"
        )
        return 0, 1
    try:
        pattern = moe_pattern(freq if isinstance(freq, int | str) else str(freq), layers)
    except PatternError as exc:
        warn.append(f"--moe-layer-freq {shown} is not read ({exc}): every layer counted MoE")
        return 0, 1
    if len(pattern) != layers:
        warn.append(
            f"--moe-layer-freq {shown} gives {len(pattern)} layers, not --num-layers {layers} "
            "(Megatron refuses it): every layer counted MoE"
        )
        return 0, 1
    found = dense_and_step(pattern)
    if found is not None:
        return found
    moe = sum(pattern)
    warn.append(
        f"--moe-layer-freq {shown} places MoE layers MemPlan cannot describe: counted as "
        f"{moe} MoE layers, the last {moe}"
    )
    return layers - moe, 1


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


def import_megatron(text: str, base: Plan, name: str | None = None) -> Imported:
    """A plan from Megatron-LM arguments over ``base``."""
    a, launcher, filled, skipped = _parse(text)
    if not a:
        raise ValueError("no Megatron-LM --flags found")
    warn: list[str] = []
    if skipped:
        warn.append(f"{skipped} if/else in the script: the first branch of each is read as taken")
    res: list[str] = [f"{v} (the script's own assignment)" for v in filled]
    s = Sizes()
    arch = _arch(a, base.model.architecture, s, warn)

    def size(key: str, default: int, used: str = "Megatron's default") -> int:
        return s.size(key, a.get(key), default, used)

    tp = size("--tensor-model-parallel-size", 1)
    pp = size("--pipeline-model-parallel-size", 1)
    cp = size("--context-parallel-size", 1)
    vocab = padded_vocab(a, tp, s, res)
    if vocab is None:
        warn.append(
            f"no --vocab-size and no tokenizer of known size "
            f"({quote(a.get('--tokenizer-type', 'none named'))}): the plan's "
            f"{arch['vocab']:,} used"
        )
    else:
        arch["vocab"] = vocab
    ch_model_name, preset = base.model.name, base.model.preset
    if arch != base.model.architecture.model_dump(mode="json"):
        ch_model_name, preset = (name or "Megatron-LM model"), None
        res.append(f"model named {ch_model_name!r} after the script (its flags set the dims)")
    if "--seq-length" not in a:
        res.append(f"no --seq-length: the plan's {base.batch.seq_len} kept")
    ch: dict[str, Any] = {
        "stack.name": "megatron_core",
        "method.kind": "full",
        "model.architecture": arch,
        "model.name": ch_model_name,
        "model.preset": preset,
        "batch.seq_len": size("--seq-length", base.batch.seq_len, "the plan's"),
        "batch.micro_batch": size("--micro-batch-size", 1),
        "parallelism.tp": tp,
        "parallelism.pp": pp,
        "parallelism.cp": cp,
        "parallelism.ep": size("--expert-model-parallel-size", 1),
        "parallelism.expert_tp": size("--expert-tensor-parallel-size", 1),
        "parallelism.sequence_parallel": "--sequence-parallel" in a,
        "parallelism.virtual_stages": size("--num-virtual-stages-per-pipeline-rank", 1),
        "parallelism.pp_layer_split": _split(a, pp, arch["layers"]),
        "parallelism.strategy": "megatron_distopt" if "--use-distributed-optimizer" in a else "ddp",
        "parallelism.shard_group_size": None,
    }
    per_chunk = s.optional(
        "--num-layers-per-virtual-pipeline-stage", a.get("--num-layers-per-virtual-pipeline-stage")
    )
    if per_chunk and pp > 1:
        ch["parallelism.virtual_stages"] = max(1, arch["layers"] // (pp * per_chunk))
    interleaved = ch["parallelism.virtual_stages"] > 1
    ch["parallelism.pp_schedule"] = "interleaved_1f1b" if interleaved else "1f1b"
    nproc = s.optional("--nproc_per_node", launcher.get("--nproc_per_node")) or 0
    world = nproc * s.size("--nnodes", launcher.get("--nnodes"), 1, "")
    dp = base.parallelism.dp
    ep = ch["parallelism.ep"] * ch["parallelism.expert_tp"]
    if world and (world % (tp * pp * cp) or (world // pp) % ep):
        raise ValueError(
            f"torchrun's world of {world} GPUs does not hold TP {tp} × PP {pp} × CP {cp}"
            f"{f' with EP {ep} in each pipeline stage' if ep > 1 else ''} (Megatron "
            "refuses it); launch it on more nodes"
        )
    if world:
        dp = world // (tp * pp * cp)  # EP folds over TP × CP × DP (Megatron-Core)
    else:
        res.append(f"no torchrun world size: DP {dp} kept from the plan")
    ch["parallelism.dp"] = dp
    mb = ch["batch.micro_batch"]
    gb = size("--global-batch-size", mb * dp, "micro × DP =")
    if gb % (mb * dp):
        warn.append(f"--global-batch-size {gb} is not a multiple of micro × DP {mb * dp}")
    ch["batch.grad_accum"], ch["batch.global_batch"] = max(1, gb // (mb * dp)), None
    _precision(a, ch)
    rg = a.get("--recompute-granularity")
    if rg is None and "--recompute-activations" in a:
        rg = "selective"  # arguments.py: --recompute-activations sets granularity selective
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
    if _float(a, "--optimizer-offload-fraction", 1.0, warn) != 1.0:
        warn.append("--optimizer-offload-fraction below 1 (partial offload) is not modelled")
    hidden = _float(a, "--hidden-dropout", 0.1, warn)
    attn = _float(a, "--attention-dropout", 0.1, warn)
    ch["method.dropout"] = hidden  # Megatron's default 0.1 when unset: 1-byte masks kept
    if (attn > 0) != (hidden > 0):
        warn.append(f"--attention-dropout {attn} read as --hidden-dropout {hidden}")
    for key in _UNMODELLED:
        if key in a:
            warn.append(f"{key} is not modelled")
    return Imported(with_values(base, ch), tuple(res), (*s.warnings, *warn))
