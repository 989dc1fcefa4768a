"""The cache FSDP1's wrap leaves, replayed from a plan's units
(:func:`engine.allocator.construction.wrap_cache`).

Why from the plan: the replay needs each unit's parameters one by one, in registration
order (Hugging Face's ``LlamaDecoderLayer``: q, k, v, o, gate, up, down, the two norms;
the root unit: the embedding, the final norm, lm_head), which the gathered rows give
only as a total. The rows' totals decide the bytes per element (bf16, or a 4-bit base
packed in bf16 storage: 0.5 B), and a layout the list does not describe exactly (MoE,
MLA, fused or biased projections) keeps the formula band
(:func:`~engine.allocator.reserve.fsdp1_init_cache`).
"""

from __future__ import annotations

from engine.allocator.checkpointed import CheckpointedForward, loss_cache
from engine.allocator.construction import wrap_cache
from engine.plan import Plan

Wrap = tuple[tuple[tuple[int, ...], ...], int]
""":func:`wrap_units`' answer: the units' parameter bytes and the ranks they shard over."""


def _layer_linears(plan: Plan) -> list[int] | None:
    a = plan.model.architecture
    plain = not (a.moe or a.mla or a.fused_qkv or a.fused_gate_up or a.qk_norm)
    biased = a.qkv_bias or a.o_bias or a.mlp_bias or a.norm_bias or a.sandwich_norm
    if not plain or biased or a.mlp != "swiglu" or a.residual != "sequential":
        return None
    h, hd = a.hidden, a.head_dim or a.hidden // a.heads
    q, kv, i = a.heads * hd * h, a.kv_heads * hd * h, a.intermediate
    return [q, kv, kv, q, h * i, h * i, i * h]


def wrap_units(plan: Plan, root: int, unit: int) -> Wrap | None:
    """The units FSDP1 wraps (each its parameters' bytes in registration order, the root
    last) and the ranks it shards them over (1: NO_SHARD); None where the plan's units are
    not a plain decoder layer and root whose bytes are the rows' ``unit`` and ``root``."""
    lin = _layer_linears(plan)
    if lin is None or unit <= 0 or root <= 0:
        return None
    a = plan.model.architecture
    h = a.hidden
    norms = 2 * h * 2  # two 16-bit RMSNorm weights
    per = (unit - norms) / sum(lin)  # bytes per linear weight element
    layer = (*(round(n * per) for n in lin), 2 * h, 2 * h)
    heads = 1 if a.tied_embeddings else 2
    c = (root - 2 * h) / (heads * a.vocab * h)
    if abs(sum(layer) - unit) > unit // 100 or per not in (0.5, 1.0, 2.0, 4.0) or c != 2:
        return None
    embed = a.vocab * h * 2
    top = (embed, 2 * h, embed) if heads == 2 else (embed, 2 * h)
    strategy = plan.parallelism.strategy
    if strategy.startswith("fsdp1_hybrid"):  # the shard group is not the whole DP group
        return None
    world = 1 if strategy == "fsdp1_no_shard" else plan.parallelism.dp
    return (layer,) * a.layers + (top,), world


def wrap_init(plan: Plan, root: int, unit: int) -> tuple[int, int] | None:
    """(low, high) cache of the wrap: without and with ``sync_module_states`` when the
    plan does not say (``parallelism.knobs.fsdp1_sync_module_states`` None), else that
    one twice; None where :func:`wrap_units` has no units."""
    got = wrap_units(plan, root, unit)
    if got is None:
        return None
    units, world = got
    sync = plan.parallelism.knobs.fsdp1_sync_module_states
    off = plan.offload.params == "cpu"
    if sync is None:
        return wrap_cache(units, world, False, off), wrap_cache(units, world, True, off)
    cached = wrap_cache(units, world, sync, off)
    return cached, cached


def forward_cache(plan: Plan, wrap: Wrap | None) -> int:
    """The compute stream's cache at the eager loss's backward after FSDP1's wrap and a
    fully checkpointed forward (:func:`engine.allocator.checkpointed.loss_cache`), for the
    loop Answer.AI's ``fsdp_qlora`` runs: Hugging Face's eager causal-LM loss with the
    fp32 logits kept by the output (``runtime.kept_logits`` fp32), every decoder layer
    checkpointed, 16-bit compute, parameters on the GPU; 0 elsewhere (not replayed).
    ``wrap``: the plan's units (:func:`wrap_units`, None: no plain units)."""
    rt, m = plan.runtime, plan.method
    eager = rt.loss_impl == "eager" and rt.activation_profile == "hf-transformers"
    if not eager or rt.kept_logits != "fp32" or m.recompute.policy != "full":
        return 0
    if plan.offload.params == "cpu" or m.precision.policy != "pure_16bit":
        return 0
    if wrap is None:
        return 0
    units, world = wrap
    a = plan.model.architecture
    hd = a.head_dim or a.hidden // a.heads
    lora = m.kind in ("lora", "qlora")
    f = CheckpointedForward(
        batch=plan.batch.micro_batch,
        seq=plan.batch.seq_len,
        hidden=a.hidden,
        q_width=a.heads * hd,
        kv_width=a.kv_heads * hd,
        heads=a.heads,
        inter=a.intermediate,
        vocab=a.vocab,
        layers=a.layers,
        lora_rank=m.lora.rank if lora else 0,
        targets=frozenset(m.lora.targets) if lora else frozenset(),
        dropout=lora and m.lora.dropout > 0,
        qlora=m.kind == "qlora",
    )
    sync = plan.parallelism.knobs.fsdp1_sync_module_states
    return loss_cache(units, world, sync is not False, f)


def no_shard_units(plan: Plan, frozen: int, nf4: int) -> tuple[int, int]:
    """(root, layer unit) unsharded bytes of a NO_SHARD plan from its base weight rows:
    the root holds the embedding, the final norm and an untied lm_head in 16 bits; a
    layer unit is the packed 4-bit row's share plus its two 16-bit norms under QLoRA,
    else the frozen row's share once the root is taken out."""
    a = plan.model.architecture
    root = a.vocab * a.hidden * 2 * (1 if a.tied_embeddings else 2) + 2 * a.hidden
    if nf4:
        return root, nf4 // a.layers + 4 * a.hidden
    return root, (frozen - root) // a.layers
