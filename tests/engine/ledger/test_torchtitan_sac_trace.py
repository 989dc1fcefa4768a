"""torch itself keeps what the torchtitan profile and the compiled loss count (CPU runs).

A small decoder block laid out as torchtitan's Llama 3 block (``models/llama3/model.py``:
``nn.RMSNorm``, wq / wk / wv, complex fp32 rotary against a ``freqs_cis`` table, SDPA with
grouped K/V, wo, ``w2(silu(w1(x)) * w3(x))``; bf16) runs once under
``torch.utils.checkpoint.checkpoint`` with ``create_selective_checkpoint_contexts`` and
the rule of torchtitan's ``SelectiveAC`` (``distributed/activation_checkpoint.py``
``_wrap_block``'s policy: an mm or flash-attention output is MUST_SAVE, but every even
``forward_mm_count`` mm is recomputed; everything else is recomputed). The bytes in the
caching mode's storage, plus the block input the checkpoint keeps, must equal
:func:`engine.ledger.activations.torchtitan.op_sac_terms` at the block's shape — which
checks the mm order (wq, wk, wv, wo, w1, w3, w2) and what the cache holds (the mm
outputs, the attention output and its fp32 logsumexp).

Without AC, autograd's saved set is the profile's ``layer_terms`` but for the norms:
torch runs ``rms_norm`` composite on CPU (an fp32 copy of the input and the fp32
normalised tensor, h·4 each, kept instead of the 16-bit input) where CUDA runs
``_fused_rms_norm`` (the input and rstd) — 2·h·4 − h·2 more per norm a token here.
"""

from __future__ import annotations

from typing import Any

import pytest

from engine.ledger.activations import torchtitan as tt
from engine.ledger.activations.geometry import Geometry, terms_bytes
from tests.trace.needs_extra import needs_trace_extra

H_, HEADS, KV, D, INTER, S, B = 256, 8, 2, 32, 704, 128, 2
G = Geometry(
    micro_batch=B,
    seq=S,
    hidden=H_,
    heads=HEADS,
    kv_heads=KV,
    head_dim=D,
    inter=INTER,
    vocab=1000,
    tp=1,
    sp=False,
    compute_bytes=2,
    embed_bytes=2,
    autocast=False,
    granularity=1,
)


def _block() -> Any:
    import torch
    import torch.nn.functional as F
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.attention_norm, self.ffn_norm = nn.RMSNorm(H_), nn.RMSNorm(H_)
            self.wq = nn.Linear(H_, HEADS * D, bias=False)
            self.wk = nn.Linear(H_, KV * D, bias=False)
            self.wv = nn.Linear(H_, KV * D, bias=False)
            self.wo = nn.Linear(HEADS * D, H_, bias=False)
            self.w1 = nn.Linear(H_, INTER, bias=False)
            self.w2 = nn.Linear(INTER, H_, bias=False)
            self.w3 = nn.Linear(H_, INTER, bias=False)

        def forward(self, x: Any, freqs: Any) -> Any:
            y = self.attention_norm(x)
            q = self.wq(y).view(B, S, HEADS, D)
            k = self.wk(y).view(B, S, KV, D)
            v = self.wv(y).view(B, S, KV, D)

            def rotate(t: Any) -> Any:
                tc = torch.view_as_complex(t.float().reshape(*t.shape[:-1], -1, 2))
                return torch.view_as_real(tc * freqs).flatten(3).type_as(t)

            q, k = rotate(q), rotate(k)
            o = F.scaled_dot_product_attention(
                q.transpose(1, 2),
                k.transpose(1, 2),
                v.transpose(1, 2),
                is_causal=True,
                enable_gqa=True,
            )
            h = x + self.wo(o.transpose(1, 2).reshape(B, S, -1))
            z = self.ffn_norm(h)
            return h + self.w2(F.silu(self.w1(z)) * self.w3(z))

    return Block().to(torch.bfloat16)


def _inputs() -> tuple[Any, Any]:
    import torch

    torch.manual_seed(0)
    freqs = torch.polar(torch.ones(S, D // 2), torch.randn(S, D // 2)).view(1, S, 1, D // 2)
    return torch.randn(B, S, H_, dtype=torch.bfloat16, requires_grad=True), freqs


def _storages(obj: Any, out: dict[int, int]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        st = obj.untyped_storage()
        out[st.data_ptr()] = st.nbytes()
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _storages(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _storages(o, out)
    elif hasattr(obj, "val"):  # checkpoint's _VersionWrapper
        _storages(obj.val, out)


@needs_trace_extra
def test_torch_sac_caches_what_op_sac_terms_count() -> None:
    import torch
    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    aten = torch.ops.aten
    save = {
        aten.mm.default,
        aten._scaled_dot_product_flash_attention.default,
        aten._scaled_dot_product_flash_attention_for_cpu.default,
    }
    modes: list[Any] = []

    def context() -> Any:
        count = {"mm": 0}

        def policy(ctx: Any, func: Any, *args: Any, **kwargs: Any) -> CheckpointPolicy:
            if func == aten.mm.default and not ctx.is_recompute:
                count["mm"] += 1
            if func in save and not (func == aten.mm.default and count["mm"] % 2 == 0):
                return CheckpointPolicy.MUST_SAVE
            return CheckpointPolicy.PREFER_RECOMPUTE

        fwd, rec = create_selective_checkpoint_contexts(policy)
        modes.append(fwd)
        return fwd, rec

    x, freqs = _inputs()
    checkpoint(_block(), x, freqs, use_reentrant=False, context_fn=context)
    cached: dict[int, int] = {}
    _storages(modes[0].storage, cached)
    block_input = B * S * H_ * 2
    assert sum(cached.values()) + block_input == terms_bytes(tt.op_sac_terms(G), G)
    assert terms_bytes(tt.op_sac_terms(G), G) == B * S * 3616  # 512+512+128+512+32+1408+512


@needs_trace_extra
def test_autograd_saves_the_layer_terms_but_for_the_cpu_norms() -> None:
    import torch

    block = _block()
    x, freqs = _inputs()
    skip = {p.untyped_storage().data_ptr() for p in block.parameters()}
    skip.add(freqs.untyped_storage().data_ptr())
    saved: dict[int, int] = {}

    def pack(t: Any) -> Any:
        if t.untyped_storage().data_ptr() not in skip:
            _storages(t, saved)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x, freqs)
    composite_extra = 2 * B * S * (2 * H_ * 4 - H_ * 2)
    assert sum(saved.values()) == terms_bytes(tt.layer_terms(G), G) + composite_extra


@needs_trace_extra
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit, imported by compile
def test_a_compiled_cross_entropy_keeps_bf16_logits_and_two_row_statistics() -> None:
    """``torch.compile`` of ``cross_entropy(pred.float(), labels, reduction="sum")``
    (torchtitan ``components/loss.py`` ``BaseLoss._maybe_compile``), partitioned by the
    min-cut partitioner Inductor uses (``aot_eager_decomp_partition`` runs it without
    code generation): the backward keeps the bf16 logits and two fp32 per-row values —
    T·V·2 + 2·T·4, what ``loss_modes.compiled_at`` counts (the labels are the batch's,
    counted in ``hbm.inputs.batch``) — and the logits' gradient comes back in bf16."""
    import torch
    import torch.nn.functional as F

    tokens, vocab = 512, 1000

    def loss(pred: Any, labels: Any) -> Any:
        return F.cross_entropy(pred.float(), labels, reduction="sum")

    compiled = torch.compile(loss, backend="aot_eager_decomp_partition")
    pred = torch.randn(tokens, vocab, dtype=torch.bfloat16, requires_grad=True)
    labels = torch.randint(0, vocab, (tokens,))
    kept: dict[int, int] = {}

    def pack(t: Any) -> Any:
        if t.dtype != torch.int64:
            _storages(t, kept)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = compiled(pred, labels)
    assert sum(kept.values()) == tokens * vocab * 2 + 2 * tokens * 4
    out.backward()
    assert pred.grad is not None and pred.grad.dtype == torch.bfloat16
