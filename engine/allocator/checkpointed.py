"""The compute stream's cache at the eager loss after a checkpointed Hugging Face forward,
replayed through the allocator simulator.

Why a replay: at the loss the caching allocator holds, beside the live tensors, every
block the forward freed — FSDP1's construction cache, the checkpointed layers' no-grad
working set, and the pieces left where each layer's kept output was cut out of a larger
freed block — and the loss's fp32 T × V requests fit none of them, so they all stay
reserved while the loss's backward runs. How much that is depends on the order and sizes
of the forward's requests (best fit, splitting), not on their sum: a layer's output
(``b·s·h·2``) is made while the residual stream's own blocks are in use, so it is cut out
of a freed MLP block (``b·s·I·2``), and the next layer's MLP takes a new segment — the
forward grows its reserve by a share of an MLP block per layer.

The requests follow the code Answer.AI's ``fsdp_qlora`` ``train.py`` ran (March 2024):
FSDP1's ``apply_activation_checkpointing`` with ``CheckpointImpl.REENTRANT``
(``torch/utils/checkpoint.py`` ``CheckpointFunction.forward``: the layer runs under
``torch.no_grad()``, only its input is saved), transformers 4.40's ``LlamaDecoderLayer``
(``LlamaRMSNorm``: fp32 upcast, ``pow``, ``mean``, ``rsqrt``, product, downcast, weight;
``LlamaSdpaAttention``: q, k, v, ``apply_rotary_pos_emb`` with ``rotate_half``'s ``cat``,
the flash kernel's output and log-sum-exp, ``o_proj``; the locals q, k, v and the
attention output live until the attention returns; ``LlamaMLP``:
``down_proj(act_fn(gate_proj(x)) * up_proj(x))``), PEFT 0.10's ``lora.Linear.forward``
(``result + lora_B(lora_A(dropout(x))) * scaling``; ``native_dropout`` makes the output
and a 1-byte mask) and, for QLoRA, bitsandbytes 0.43's ``MatMul4Bit.forward``
(``F.dequantize_4bit`` makes the 16-bit weight, freed after the matmul) and PEFT's
``bnb.Linear4bit`` ``result = result.clone()``; then ``LlamaForCausalLM.forward``:
the final norm (with grad), the 16-bit logits, ``logits.float()``, the shifted copy,
``log_softmax``; and the loss's backward: ``nll_loss_backward``'s and
``log_softmax_backward``'s fp32 gradients. Requests under 1 MiB (norm statistics,
the log-sum-exp) are kept: they go to the small pool and change nothing here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from itertools import count

from engine.allocator.construction import replay_wrap
from engine.allocator.simulator import Simulator

FP32 = 4


@dataclass(frozen=True, slots=True)
class CheckpointedForward:
    """What the replay needs of a plan: the micro-batch, a plain decoder layer's widths,
    the vocabulary, the adapters and the 16-bit compute dtype's size."""

    batch: int
    seq: int
    hidden: int
    q_width: int  # heads · head_dim
    kv_width: int  # kv_heads · head_dim
    heads: int
    inter: int
    vocab: int
    layers: int
    lora_rank: int  # 0: no adapters
    targets: frozenset[str]  # of q, k, v, o, gate, up, down
    dropout: bool
    qlora: bool
    compute: int = 2


class _Tape:
    """Requests into a simulator with fresh block ids (positive: the wrap's are negative)."""

    def __init__(self, sim: Simulator) -> None:
        self.sim = sim
        self._ids = count(1)

    def new(self, n: int) -> int:
        i = next(self._ids)
        self.sim.malloc(i, n)
        return i

    def free(self, *ids: int) -> None:
        for i in ids:
            self.sim.free(i)


def _norm(t: _Tape, tokens: int, width: int, c: int) -> int:
    """``LlamaRMSNorm`` under no grad: returns the 16-bit output's block."""
    x32 = t.new(tokens * width * FP32)
    sq = t.new(tokens * width * FP32)
    var = t.new(tokens * FP32)
    t.free(sq)
    eps = t.new(tokens * FP32)
    rs = t.new(tokens * FP32)
    t.free(eps)
    y32 = t.new(tokens * width * FP32)
    t.free(rs, x32)
    down = t.new(tokens * width * c)
    out = t.new(tokens * width * c)
    t.free(down, y32, var)
    return out


def _linear(t: _Tape, f: CheckpointedForward, tokens: int, name: str, n_in: int, n_out: int) -> int:
    """One projection of ``n_in`` → ``n_out`` features (its input kept by the caller):
    the base (QLoRA: the dequantized weight, then PEFT's clone) and the adapter."""
    c = f.compute
    if f.qlora:
        w = t.new(n_in * n_out * c)
        base = t.new(tokens * n_out * c)
        t.free(w)
    else:
        base = t.new(tokens * n_out * c)
    if name not in f.targets or f.lora_rank == 0:
        return base
    if f.qlora:
        cl = t.new(tokens * n_out * c)
        t.free(base)
        base = cl
    x = 0
    if f.dropout:
        x = t.new(tokens * n_in * c)
        mask = t.new(tokens * n_in)
        t.free(mask)
    a = t.new(tokens * f.lora_rank * c)
    if x:
        t.free(x)
    b = t.new(tokens * n_out * c)
    t.free(a)
    scaled = t.new(tokens * n_out * c)
    t.free(b)
    out = t.new(tokens * n_out * c)
    t.free(scaled, base)
    return out


def _rotary(t: _Tape, tokens: int, width: int, c: int) -> int:
    """``q * cos + rotate_half(q) * sin``: returns the rotated tensor's block."""
    n = tokens * width * c
    qc = t.new(n)
    neg = t.new(n // 2)
    cat = t.new(n)
    t.free(neg)
    rs = t.new(n)
    t.free(cat)
    out = t.new(n)
    t.free(qc, rs)
    return out


def _layer(t: _Tape, f: CheckpointedForward, x: int) -> int:
    """One decoder layer under no grad from input block ``x`` (kept: the checkpoint's
    saved input); returns its output's block."""
    tok, c, h = f.batch * f.seq, f.compute, f.hidden
    y = _norm(t, tok, h, c)
    q = _linear(t, f, tok, "q", h, f.q_width)
    k = _linear(t, f, tok, "k", h, f.kv_width)
    v = _linear(t, f, tok, "v", h, f.kv_width)
    qr = _rotary(t, tok, f.q_width, c)
    kr = _rotary(t, tok, f.kv_width, c)
    t.free(q, k)  # the unrotated projections, once apply_rotary_pos_emb returned
    attn = t.new(tok * f.q_width * c)
    lse = t.new(tok * f.heads * FP32)
    t.free(lse)
    o = _linear(t, f, tok, "o", f.q_width, h)
    t.free(qr, kr, v, attn, y)  # the attention's locals, then the norm's output
    h1 = t.new(tok * h * c)
    t.free(o)
    y2 = _norm(t, tok, h, c)
    gate = _linear(t, f, tok, "gate", h, f.inter)
    act = t.new(tok * f.inter * c)
    t.free(gate)
    up = _linear(t, f, tok, "up", h, f.inter)
    prod = t.new(tok * f.inter * c)
    t.free(act, up)
    down = _linear(t, f, tok, "down", f.inter, h)
    t.free(prod, y2)
    out = t.new(tok * h * c)
    t.free(down, h1)
    return out


def _loss(t: _Tape, f: CheckpointedForward, x: int) -> Callable[[], int]:
    """The final norm, the 16-bit logits, their fp32 upcast (kept by the output), the
    shifted copy and the log-probs, then the loss backward's two fp32 gradients;
    returns a reader of the reserve at the second gradient."""
    tok, c, v = f.batch * f.seq, f.compute, f.vocab
    shifted = (tok - f.batch) * v * FP32
    t.new(tok * f.hidden * FP32)  # the fp32 input, saved by pow and the product
    sq = t.new(tok * f.hidden * FP32)
    t.new(tok * FP32)
    t.free(sq)
    y32 = t.new(tok * f.hidden * FP32)
    down = t.new(tok * f.hidden * c)
    t.free(y32)
    y = t.new(tok * f.hidden * c)  # held by the model output until the loss returns
    t.free(down, x)
    logits16 = t.new(tok * v * c)
    t.new(tok * v * FP32)  # logits.float(): the output keeps it
    t.free(logits16)
    shift = t.new(shifted)
    t.new(shifted)  # log_softmax's output, saved
    t.free(shift, y)
    t.new(shifted)  # nll_loss_backward
    t.new(shifted)  # log_softmax_backward
    return lambda: t.sim.reserved - t.sim.allocated


@lru_cache(maxsize=64)
def loss_cache(
    units: tuple[tuple[int, ...], ...], world: int, sync: bool, f: CheckpointedForward
) -> int:
    """Bytes the compute stream keeps cached, beyond its live tensors, when the eager
    loss's backward makes its second fp32 gradient: FSDP1's wrap of ``units`` over
    ``world`` ranks (``sync``: broadcast), then the embedding output, ``f.layers``
    checkpointed layers and the loss, replayed through :class:`Simulator`."""
    sim = Simulator()
    replay_wrap(sim, units, world, sync)
    t = _Tape(sim)
    x = t.new(f.batch * f.seq * f.hidden * f.compute)  # the embedding output
    for _ in range(f.layers):
        x = _layer(t, f, x)
    return _loss(t, f, x)()
