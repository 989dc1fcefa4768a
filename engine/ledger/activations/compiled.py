"""``torch.compile``: the saved tensors of the ops the compiled step fuses, as a range.

Why a range. Under ``torch.compile`` AOT Autograd partitions the joint forward-backward
graph with its min-cut partitioner (torch/_functorch/partitioners.py,
``min_cut_rematerialization_partition``): a pointwise op Inductor can fuse is *recomputed*
in backward from a cheaper saved input rather than saved. Which cut it picks depends on
the graph, so the compiled saved set is not fixed by the model alone; the ledger keeps
the eager set as the high end and lowers the low end by the tensors the partitioner can
avoid in a Llama-style layer (``modeling_llama.py`` eager ops, hf-transformers profile):

- **RMSNorm** (``LlamaRMSNorm.forward``: ``hidden_states.to(float32)``, ``pow``, ``mean``,
  ``rsqrt``, ``mul``, ``to(input_dtype)``, ``weight *``): eager autograd keeps the fp32
  upcast of the input and, when the norm's weight trains, the 16-bit normalised tensor.
  Fused, backward recomputes both from the 16-bit input and the fp32 rstd: the fp32 input
  becomes the 16-bit one (``(4 − residual bytes)`` a token per element saved) and the
  normalised tensor is not kept.
- **SwiGLU** (``LlamaMLP.forward``: ``down_proj(act_fn(gate_proj(x)) * up_proj(x))``):
  eager keeps gate, act(gate), up and the product; fused, the partitioner keeps gate and
  up and recomputes act(gate) and the product (two tensors of the intermediate width).

Measured effects bound it (source ``torch-compile-partitioner``): torchtitan's Llama-3.1-8B
benchmark (benchmarks/llama3_h100_202412_torchtitan.md, Table 1: 82.4 → 77.0 GiB,
Table 3: 67.0 → 62.0 GiB, both with selective AC: −6.6 % and −7.5 % of the reserved
peak) and torchtune's README optimization table (Llama-3.2-3B full fine-tune, no AC:
60.0 → 51.0 GiB allocated, −15 %, the compiled loss included). The compiled loss
itself (no fp32 logits copies) belongs to the loss rows (``runtime.loss``), not here;
``mode="reduce-overhead"`` CUDA-graph pools are not counted.

**torchtitan's profile** (``apply_compile`` compiles each ``TransformerBlock`` after its
AC wrap, torchtitan ``parallelize_llama.py``; the loss stays eager at 9dec370, ``train.py``
"compiling loss function causes CUDA errors"): its norms are counted as torch's fused
kernel already, so only the SwiGLU pair comes off a block that keeps its saved set or is
recomputed. Under per-op SAC the save list's tags reach the partitioner
(``CheckpointPolicy.MUST_SAVE`` bans recomputing a listed op's output, it does not make
the graph keep it): the compiled block keeps only what its backward reads, while eager
SAC's ``_CachingTorchDispatchMode`` caches every listed output for the replay. w2's
output (the block's last mm, cached: ``forward_mm_count`` 7) is read by no backward node
— w2's backward reads its input and weight, the residual add nothing — so the low end
drops c·h a token per block (4.0 GiB on the Dec-2024 8B FSDP row: 82.4 → 77.0 GiB
measured).

Applies to the hf-transformers and torchtitan profiles' dense decoder layers of RMSNorm + gated-SiLU
families with pre-norms (Llama, Mistral, Qwen-2/3, …) that keep their saved set (not
checkpointed: a checkpointed layer keeps only its input). MoE layers, other norms and
activations, and the megatron profile keep eager figures at both ends. The lowered low
end depends on the dense layers only, never on EP or the expert terms, so the activation
rows' low stays non-decreasing in the rest of their bytes (the cross-EP bound of
:mod:`engine.layout.proofs.cross_ep` reads that).
"""

from __future__ import annotations

from collections.abc import Callable

from engine.ledger.activations.geometry import (
    FP32,
    Geometry,
    Term,
    geometry,
    terms_at,
    trainability,
)
from engine.ledger.activations.hf import dense_width
from engine.ledger.activations.stage_layers import StageLayers
from engine.ledger.activations.traits import traits_of
from engine.models.spec import ArchitectureSpec
from engine.plan import Plan

SOURCE = "torch-compile-partitioner"

NORM_SITES = 2
"""Sequential pre-norm layer: input_layernorm and post_attention_layernorm."""


def applies(arch: ArchitectureSpec, profile: str) -> bool:
    """Whether the fused-op model covers this family's layers (see the module doc)."""
    t = traits_of(arch)
    return (
        profile in ("hf-transformers", "torchtitan")
        and arch.mlp != "gelu"
        and t.activation == "silu"
        and t.norm == "rms"
        and t.pre_norms
        and not t.post_norms
        and arch.residual == "sequential"
        and arch.mla is None
    )


def fused_terms(
    g: Geometry, norms_trained: bool, inter: int, profile: str = "hf-transformers"
) -> list[Term]:
    """The per-token tensors eager autograd keeps in one dense layer that the compiled
    step recomputes instead (module doc): per norm site the fp32 upcast's extra bytes and
    the normalised tensor (when the norm trains); the MLP's act(gate) and product.
    torchtitan's profile counts its norms as torch's fused kernel already (input and
    rstd): only the MLP pair comes off."""
    if profile == "torchtitan":
        return [Term("SwiGLU silu(w1), product (recomputed)", inter, g.compute_bytes, count=2)]
    rb = g.residual_bytes
    terms = [Term("RMSNorm fp32 upcast → 16-bit input", g.hidden, FP32 - rb, "seq", NORM_SITES)]
    if norms_trained:
        terms.append(Term("RMSNorm normalised (recomputed)", g.hidden, rb, "seq", NORM_SITES))
    terms.append(Term("SwiGLU act(gate), gate·up product", inter, g.compute_bytes, count=2))
    return terms


def per_layer_at(plan: Plan) -> Callable[[int], int] | None:
    """Bytes one dense layer's compiled saved set need not keep, as a function of the
    micro-batch's size (None: eager, or a profile the model does not cover). The plan is
    read here, once."""
    arch = plan.model.architecture
    if not plan.workload.torch_compile or not applies(arch, plan.runtime.activation_profile):
        return None
    g0 = geometry(plan)
    profile = plan.runtime.activation_profile
    terms = fused_terms(g0, trainability(plan).norms, dense_width(arch, g0.tp), profile)
    return terms_at(terms, g0).bytes


def sac_unused_terms(g: Geometry) -> list[Term]:
    """What torchtitan's per-op SAC caches that no backward node reads (module doc): w2's
    output (the block's last mm, cached by the save list; its backward reads its input
    and weight, the residual add nothing)."""
    return [Term("w2 output (cached, read by no backward)", g.hidden, g.compute_bytes)]


def fused_at(plan: Plan) -> Callable[[Geometry, StageLayers], int] | None:
    """Bytes the compiled step need not keep on a stage, as a function of the micro-batch's
    geometry and the stage's layers counted there (None: eager, or a profile the model
    does not cover). The plan is read here, once."""
    per_layer = per_layer_at(plan)
    if per_layer is None:
        return None
    sac = (
        terms_at(sac_unused_terms(geometry(plan)), geometry(plan)).bytes
        if plan.runtime.activation_profile == "torchtitan"
        and plan.method.recompute.policy == "selective"
        else None
    )

    def at(g: Geometry, sl: StageLayers) -> int:
        # per-op SAC's checkpointed blocks, all dense (a stage with MoE layers keeps the
        # eager figure: the low end never reads the expert terms)
        cached = (
            sl.n_ckpt * sac(g.micro_batch)
            if sac is not None and not any(k.moe for k in sl.kinds)
            else 0
        )
        dense = sum([k.saved for k in sl.kinds if not k.moe])
        if not dense:
            return cached
        # never more than the dense layers keep (the first layer after a frozen
        # embedding keeps no fp32 upcast of its input norm)
        kept = sum([k.bytes * k.saved for k in sl.kinds if not k.moe])
        return cached + min(kept, dense * per_layer(g.micro_batch))

    return at


def compile_formula(removed: int) -> str:
    """The compile step of an activation row's formula ("" when nothing is removed)."""
    if not removed:
        return ""
    return (
        f"; torch.compile: low end without {removed:,} B of fused RMSNorm / SwiGLU "
        f"intermediates the min-cut partitioner recomputes [{SOURCE}]"
    )
