"""A Megatron-LM launch script (``torchrun … pretrain_gpt.py --flags``) from a plan.

Targets Megatron-LM main after core_v0.19.0 (commit d98e8a6, 2026-08-22): every flag is
one of ``megatron/training/arguments.py``'s options (incl. those generated from
``TransformerConfig``). The model is stated in full, because Megatron's defaults build
another one: ``add_bias_linear`` is on unless ``--disable-bias-linear``, dropout is 0.1
unless set, the MLP is GeLU unless ``--swiglu``, head dim = hidden / heads unless
``--kv-channels``. MoE, MLA, uneven pipeline splits (``--decoder-first/last-pipeline-
num-layers`` or ``--pipeline-model-parallel-layout``), recomputation, the distributed
optimizer and its precision flags follow. Data and schedule flags are placeholders.
"""

from __future__ import annotations

import shlex
from typing import Any

from engine.exports.common import (
    JOB_SHAPE_FIELDS,
    Export,
    Gaps,
    comment_block,
    comment_lines,
    ranks_per_node,
    stage_split,
    storage_gap,
)
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan
from engine.stacks.defaults import resolve_stack_defaults, resolved
from engine.stacks.families import family_of
from engine.workload import global_batch

TARGET = "Megatron-LM main @ d98e8a6 (2026-08-22, after core_v0.19.0)"
PLACEHOLDERS: dict[str, Any] = {
    "--mock-data": True,
    "--tokenizer-type": "NullTokenizer",
    "--train-iters": 1000,
    "--lr": 0.0001,
}
"""Data and schedule flags a runnable command needs; they change no memory."""


def _model(arch: ArchitectureSpec, a: dict[str, Any], gaps: Gaps) -> None:
    m = "model.architecture"
    a.update(
        {
            "--num-layers": arch.layers,
            "--hidden-size": arch.hidden,
            "--ffn-hidden-size": arch.intermediate,
            "--num-attention-heads": arch.heads,
            "--vocab-size": arch.vocab,
            "--make-vocab-size-divisible-by": 1,
        }
    )
    if arch.kv_heads != arch.heads:
        a["--group-query-attention"] = True
        a["--num-query-groups"] = arch.kv_heads
    if arch.head_dim is not None and arch.mla is None:
        a["--kv-channels"] = arch.head_dim
    linear = (arch.o_bias, arch.mlp_bias)
    if not any(linear):
        a["--disable-bias-linear"] = True
        if arch.qkv_bias:
            a["--add-qkv-bias"] = True
    elif not all(linear) or not arch.qkv_bias:
        gaps.add(f"{m}.o_bias", "Megatron's add_bias_linear puts a bias on every linear")
    if arch.lm_head_bias:
        gaps.add(f"{m}.lm_head_bias", "Megatron's output layer has no bias")
    if arch.mlp == "swiglu":
        a["--swiglu"] = True
    elif arch.mlp == "geglu":
        gaps.add(f"{m}.mlp", "GeGLU has no flag (gated_linear_unit + gelu in a model provider)")
    a["--normalization"] = "RMSNorm" if arch.norm == "rmsnorm" else "LayerNorm"
    if (arch.norm == "layernorm") != arch.norm_bias:
        gaps.add(f"{m}.norm_bias", "Megatron's LayerNorm has a bias, its RMSNorm none")
    if arch.qk_norm:
        a["--qk-layernorm"] = True
    if arch.sandwich_norm:
        gaps.add(f"{m}.sandwich_norm", "no post-attention / post-MLP norms in Megatron's GPT")
    if arch.residual != "sequential":
        gaps.add(f"{m}.residual", "Megatron's GPT layer is sequential")
    a["--position-embedding-type"] = "rope" if arch.position == "rotary" else "learned_absolute"
    a["--max-position-embeddings"] = arch.max_position
    if not arch.tied_embeddings:
        a["--untie-embeddings-and-output-weights"] = True
    if arch.mtp_layers:
        a["--mtp-num-layers"] = arch.mtp_layers
    _moe(arch, a, gaps)
    _mla(arch, a)


def _moe(arch: ArchitectureSpec, a: dict[str, Any], gaps: Gaps) -> None:
    moe = arch.moe
    if moe is None:
        return
    a["--num-experts"] = moe.num_experts
    a["--moe-router-topk"] = moe.top_k
    a["--moe-ffn-hidden-size"] = moe.expert_intermediate
    if moe.shared_experts:
        width = moe.shared_intermediate or moe.expert_intermediate
        a["--moe-shared-expert-intermediate-size"] = moe.shared_experts * width
        if moe.shared_experts > 1:
            why = "Megatron builds one shared expert of the summed width (same count)"
            gaps.add("model.architecture.moe.shared_experts", why)
            gaps.add("model.architecture.moe.shared_intermediate", why)
        if moe.shared_expert_gate:
            a["--moe-shared-expert-gate"] = True
    elif moe.shared_expert_gate:
        gaps.add("model.architecture.moe.shared_expert_gate", "needs a shared expert")
    if moe.first_dense_layers or moe.layer_step > 1:
        pattern = [1 if moe.is_moe_layer(i) else 0 for i in range(arch.layers)]
        a["--moe-layer-freq"] = "[" + ",".join(map(str, pattern)) + "]"
    if moe.dense_intermediate not in (None, arch.intermediate):
        a["--ffn-hidden-size"] = moe.dense_intermediate
        gaps.add("model.architecture.intermediate", "Megatron has one dense FFN width")
    if moe.router_bias:
        a["--moe-router-enable-expert-bias"] = True
        a["--moe-router-score-function"] = "sigmoid"
    if moe.capacity_factor != 1.0:
        a["--moe-expert-capacity-factor"] = moe.capacity_factor
    a["--moe-grouped-gemm"] = True
    why = "Megatron-Core's TEGroupedMLP holds one weight per expert"
    storage_gap(arch, "per_expert", gaps, why)


def _mla(arch: ArchitectureSpec, a: dict[str, Any]) -> None:
    mla = arch.mla
    if mla is None:
        return
    a["--multi-latent-attention"] = True
    if mla.q_lora_rank is not None:
        a["--q-lora-rank"] = mla.q_lora_rank
    a["--kv-lora-rank"] = mla.kv_lora_rank
    a["--qk-head-dim"] = mla.qk_nope_head_dim
    a["--qk-pos-emb-head-dim"] = mla.qk_rope_head_dim
    a["--v-head-dim"] = mla.v_head_dim


def _pipeline(plan: Plan, a: dict[str, Any], gaps: Gaps) -> None:
    par = plan.parallelism
    if par.virtual_stages > 1:
        a["--num-virtual-stages-per-pipeline-rank"] = par.virtual_stages
    if par.pp_schedule == "gpipe":
        gaps.add("parallelism.pp_schedule", "Megatron runs 1F1B (interleaved with virtual stages)")
    if par.pp == 1:
        return
    if par.pp_layout is not None:  # the user's own layout string, as Megatron reads it
        a["--pipeline-model-parallel-layout"] = par.pp_layout
        return
    split = stage_split(plan)
    if len(set(split)) == 1:  # even: Megatron's default split
        return
    if par.virtual_stages > 1:
        gaps.add("parallelism.pp_layer_split", "an uneven split with virtual stages")
        return
    middle = split[1:-1]
    if (len(set(middle)) <= 1 and par.pp > 2) or par.pp == 2:
        a["--decoder-first-pipeline-num-layers"] = split[0]
        a["--decoder-last-pipeline-num-layers"] = split[-1]
    else:
        stages = ["t" * n for n in split]
        stages[0], stages[-1] = "E" + stages[0], stages[-1] + "L"
        a["--pipeline-model-parallel-layout"] = "|".join(stages)


def _precision(plan: Plan, a: dict[str, Any], gaps: Gaps) -> None:
    prec = plan.method.precision
    c = prec.compute_dtype
    if prec.policy == "fp32" or c == "fp32":
        if prec.policy != "fp32":
            gaps.add("method.precision.policy", "Megatron without --bf16/--fp16 is fp32")
        return
    if prec.policy != "amp_master":
        gaps.add("method.precision.policy", f"Megatron keeps an fp32 master; {prec.policy} no")
    a[f"--{c}"] = True
    aware = plan.method.optimizer.precision_aware or prec.optimizer_state_dtype != "fp32"
    if prec.grad_dtype == "bf16" and aware:
        a["--main-grads-dtype"] = "bf16"
    elif prec.grad_dtype == "bf16":  # a bf16 grad buffer, copied to fp32 for the step
        a["--grad-reduce-in-bf16"] = True
    elif prec.grad_dtype != "fp32":
        # arguments.py: --main-grads-dtype choices are fp32 and bf16 only
        gaps.add(
            "method.precision.grad_dtype",
            f"Megatron's main grads are fp32 or bf16, not {prec.grad_dtype}",
        )
    if prec.optimizer_state_dtype != "fp32":
        a["--exp-avg-dtype"] = a["--exp-avg-sq-dtype"] = prec.optimizer_state_dtype
    if aware:
        a["--use-precision-aware-optimizer"] = True
    if c == "fp16" and not prec.loss_scaling:
        a["--loss-scale"] = 1.0
    if c != "fp16" and prec.loss_scaling:
        gaps.add("method.precision.loss_scaling", "only with --fp16")


def _recompute(plan: Plan, a: dict[str, Any], gaps: Gaps) -> None:
    rc = plan.method.recompute.policy
    if rc == "full":
        a["--recompute-granularity"] = "full"
        a["--recompute-method"] = "uniform"
        a["--recompute-num-layers"] = 1
    elif rc == "selective":
        a["--recompute-granularity"] = "selective"
    elif rc != "none":
        gaps.add("method.recompute.policy", f"{rc} has no Megatron recompute flags")


def _optimizer(plan: Plan, a: dict[str, Any], gaps: Gaps) -> None:
    opt, off = plan.method.optimizer, plan.offload
    if opt.name in ("adamw", "sgd"):
        a["--optimizer"] = "adam" if opt.name == "adamw" else "sgd"
    else:
        gaps.add("method.optimizer.name", f"{opt.name} is not a Megatron optimizer")
    if opt.implementation != "fused":
        gaps.add("method.optimizer.implementation", "Megatron's Adam is TE / Apex FusedAdam")
    if off.optimizer == "cpu" and family_of(plan.parallelism.strategy) != "megatron":
        # validate_args: CPU offload needs --use-precision-aware-optimizer, which
        # megatron/core/optimizer/__init__.py runs only with the distributed optimizer
        gaps.add(
            "offload.optimizer",
            "Megatron offloads the optimizer only with --use-distributed-optimizer "
            f"(not {plan.parallelism.strategy}): not written",
        )
    elif off.optimizer == "cpu":
        a["--optimizer-cpu-offload"] = True
        a["--optimizer-offload-fraction"] = 1.0
        a["--use-precision-aware-optimizer"] = True
    elif off.optimizer == "nvme":
        gaps.add("offload.optimizer", "Megatron offloads the optimizer to the CPU only")
    if off.params != "none":
        gaps.add("offload.params", "Megatron does not offload parameters")


def megatron_args(plan: Plan) -> tuple[dict[str, Any], Gaps]:
    """Flag → value (True for a bare flag), and what they cannot say."""
    plan = resolved(plan)  # fields left to the training stack take its defaults
    par, b = plan.parallelism, plan.batch
    gaps = Gaps()
    r = resolve_stack_defaults(plan)
    stack = r.stack
    if stack != "megatron_core":
        gaps.add("stack.name", f"Megatron-LM runs Megatron-Core, not {stack}")
    if plan.method.kind != "full":
        gaps.add("method.kind", f"{plan.method.kind}: Megatron-LM trains every parameter")
    a: dict[str, Any] = {}
    _model(plan.model.architecture, a, gaps)
    a["--attention-dropout"] = a["--hidden-dropout"] = r.plan.method.dropout  # masks kept
    a.update(
        {
            "--seq-length": b.seq_len,
            "--micro-batch-size": b.micro_batch,
            "--global-batch-size": global_batch(plan),
            "--tensor-model-parallel-size": par.tp,
            "--pipeline-model-parallel-size": par.pp,
            "--context-parallel-size": par.cp,
            "--expert-model-parallel-size": par.ep,
            "--expert-tensor-parallel-size": par.expert_tp,
        }
    )
    if b.seq_len > plan.model.architecture.max_position:
        a["--max-position-embeddings"] = b.seq_len
        gaps.add("model.architecture.max_position", "Megatron needs it ≥ the sequence length")
    if par.sequence_parallel:
        a["--sequence-parallel"] = True
    _pipeline(plan, a, gaps)
    family = family_of(par.strategy)
    if family == "megatron":
        a["--use-distributed-optimizer"] = True
    elif family != "ddp":
        gaps.add("parallelism.strategy", f"{par.strategy} has no Megatron-LM flag; written as DDP")
    _precision(plan, a, gaps)
    _recompute(plan, a, gaps)
    _optimizer(plan, a, gaps)
    a.update(PLACEHOLDERS)
    return a, gaps


ARCH_FIELDS = [
    "hidden",
    "layers",
    "heads",
    "kv_heads",
    "head_dim",
    "intermediate",
    "vocab",
    "max_position",
    "tied_embeddings",
    "mlp",
    "norm",
    "norm_bias",
    "qkv_bias",
    "o_bias",
    "mlp_bias",
    "lm_head_bias",
    "qk_norm",
    "sandwich_norm",
    "position",
    "residual",
    "moe",
    "mla",
    "mtp_layers",
]
"""The architecture fields the flags state (family, fused tensors and the checkpoint
dtype change no count Megatron builds, and stay the plan's)."""


def expressed(plan: Plan) -> frozenset[str]:
    """The plan fields this plan's Megatron command carries."""
    p = resolved(plan)
    out = {
        *JOB_SHAPE_FIELDS,
        *(f"model.architecture.{f}" for f in ARCH_FIELDS),
        "parallelism.pp",
        "parallelism.cp",
        "parallelism.ep",
        "parallelism.expert_tp",
        "parallelism.sequence_parallel",
        "parallelism.virtual_stages",
        "parallelism.pp_layer_split",
        "method.precision.policy",
        "method.precision.compute_dtype",
        "method.precision.loss_scaling",
        "method.recompute.policy",
        "method.optimizer.name",
        "method.optimizer.implementation",
        "offload.optimizer",
        "offload.params",
    }
    if p.method.precision.policy == "amp_master":
        out |= {"method.precision.grad_dtype", "method.precision.optimizer_state_dtype"}
    return frozenset(out)


def argv(args: dict[str, Any]) -> list[str]:
    """The flags as the launched program receives them (what ``--check`` hands to
    Megatron's parser: MemPlan's own values, never re-read from the script's text)."""
    return [tok for k, v in args.items() for tok in ([k] if v is True else [k, str(v)])]


def to_text(args: dict[str, Any]) -> str:
    """The flags as script lines, every value shell-quoted: a layout ``Ettt|tttL`` is
    a pipe to bash, ``(t)*16`` a syntax error and ``[0,1]`` / ``t*16`` globs unless
    quoted (issue 33)."""
    lines = [k if v is True else f"{k} {shlex.quote(str(v))}" for k, v in args.items()]
    return " \\\n".join(f"    {ln}" for ln in lines) + "\n"


def launch_env(plan: Plan) -> dict[str, str]:
    """The environment the script exports (``validate_args`` asserts
    ``CUDA_DEVICE_MAX_CONNECTIONS=1`` under TP or CP); ``--check`` sets the same, from
    this function, never from the script's text."""
    par = resolved(plan).parallelism
    return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"} if par.tp > 1 or par.cp > 1 else {}


def export_megatron(plan: Plan) -> Export:
    args, gaps = megatron_args(plan)
    p = resolved(plan)
    world = p.parallelism.world_size
    per_node = min(ranks_per_node(p), world)
    nodes = -(-world // per_node)
    if world % per_node:
        gaps.add("parallelism.dp", f"torchrun starts whole nodes: {nodes} × {per_node} ranks")
    head = [
        f"Megatron-LM launch for {plan.model.name}, written by MemPlan ({TARGET}).",
        "Data, tokenizer, schedule and learning rate flags are placeholders.",
    ]
    text = "#!/bin/bash\n" + comment_lines(head) + comment_block(gaps())
    for k, v in launch_env(plan).items():
        text += f"export {k}={shlex.quote(v)}\n"
    text += f"torchrun --nproc_per_node {per_node} --nnodes {nodes} pretrain_gpt.py \\\n"
    text += to_text(args)
    return Export("megatron", "megatron_train.sh", text, gaps(), TARGET)
