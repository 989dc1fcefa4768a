"""What the activation profiles need to know: the local shapes and who needs a gradient.

Autograd saves a tensor for backward only when some gradient needs it: a linear layer
keeps its input only if its weight is trained (or a LoRA adapter reads the same input),
an RMSNorm keeps its normalised input only if its weight is trained, and a rotary
multiply keeps only cos/sin. So the saved set depends on which tensors are trainable,
which is why the profiles take a :class:`Trainability` besides the shapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Literal, NamedTuple

from engine.ledger.activations.library_versions import kept_input_roles
from engine.ledger.precision import DTYPE_BYTES
from engine.ledger.shape_free import free_memo, shape_free
from engine.ledger.states.lora import litgpt_parts
from engine.plan import Plan
from engine.sections.method import MethodSection
from engine.stacks.defaults import require_resolved
from engine.stacks.families import rule_of
from engine.units import ceil_div, round_up

TokenAxis = Literal["full", "seq", "const"]
"""How a saved tensor scales: with the micro-batch's tokens (``full``), with the tokens
of the norm / residual region (``seq``: ÷ TP under sequence parallelism), or not at all
(``const``: e.g. Gemma's fp32 ``1 + w``, one per norm)."""

FP32 = 4
"""Bytes of an fp32 element (upcasts, softmax statistics, log-probs)."""
INT64 = 8
"""Bytes of an int64 element (token ids, labels, positions)."""


class MoeGeometry(NamedTuple):
    """A mixture-of-experts layer as one token sees it (per rank, after expert TP).

    ``inter`` of the Geometry is then the intermediate width a token passes through:
    top_k routed experts (× capacity factor) plus the shared experts, so the MLP's saved
    tensors scale as the routed computation does. Dense first layers are counted like
    the MoE layers (a small over- or under-count, said in the row's formula).
    """

    experts: int
    top_k: int
    capacity: float


class MlaGeometry(NamedTuple):
    """Multi-head latent attention's low-rank latents (DeepSeek-V2/V3)."""

    q_rank: int  # 0 when q is not low-rank
    kv_rank: int
    rope_dim: int
    kv_b_width: int = 0  # kv_b_proj's output per head: no-rope k dims + v dims


class Geometry(NamedTuple):
    """Shapes of one micro-batch on one rank, after TP and CP split them.

    A named tuple rather than a frozen dataclass: as immutable, built and hashed in C —
    every fresh estimate builds one (its micro-batch's shape on the plan's cached rest,
    :func:`geometry`) and a dozen caches key on it."""

    micro_batch: int
    seq: int  # local sequence length (after context parallelism)
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    tp: int
    sp: bool  # sequence parallelism: norm/residual regions split the tokens by TP
    compute_bytes: int
    embed_bytes: int  # dtype of the embedding output (the residual stream's start)
    autocast: bool  # fp32 parameters with a 16-bit compute cast at each matmul
    granularity: int
    v_head_dim: int = 0  # value head dim when it differs from q/k (MLA); 0 = head_dim
    gathered_logits: bool = False  # TP style: every rank holds the full-vocabulary logits
    moe: MoeGeometry | None = None
    mla: MlaGeometry | None = None

    @property
    def logits_vocab(self) -> int:
        """Vocabulary entries of the logits one rank holds: V ÷ TP when the output layer
        stays vocab-parallel, the whole V when TP gathers (or never splits) it."""
        return self.vocab if self.gathered_logits else ceil_div(self.vocab, self.tp)

    @property
    def tokens(self) -> int:
        return self.micro_batch * self.seq

    @property
    def seq_tokens(self) -> int:
        """Tokens a rank holds in the norm / residual region (÷ TP under SP)."""
        return ceil_div(self.tokens, self.tp) if self.sp else self.tokens

    @property
    def heads_local(self) -> int:
        return ceil_div(self.heads, self.tp)

    @property
    def kv_local(self) -> int:
        return ceil_div(self.kv_heads, self.tp)

    @property
    def inter_local(self) -> int:
        return ceil_div(self.inter, self.tp)

    @property
    def v_dim(self) -> int:
        return self.v_head_dim or self.head_dim

    @property
    def residual_bytes(self) -> int:
        """Under autocast the fp32 embedding output keeps the residual stream fp32."""
        return 4 if self.autocast else self.compute_bytes


class Trainability(NamedTuple):
    """Which weights get a gradient, and where LoRA adapters sit (a named tuple: a
    dozen caches key on it, and a tuple hashes in C)."""

    embedding: bool
    norms: bool
    lm_head: bool
    linear_roles: frozenset[str]  # base linear roles whose weight is trained
    adapter_roles: frozenset[str]  # roles with a LoRA adapter
    rank: int = 0
    adapter_bytes: int = 4
    adapter_dropout: bool = False
    dropout: bool = False  # the model's hidden / attention dropout (method.dropout > 0)
    kept_inputs: frozenset[str] = frozenset()  # frozen linears keeping their input anyway
    fused_parts: frozenset[str] = frozenset()  # LitGPT: q / k / v parts of the qkv adapter

    def needs_input(self, role: str) -> bool:
        return role in self.linear_roles or role in self.adapter_roles


ALL_LINEAR_ROLES = frozenset(
    {
        *("q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down"),
        *("q_a", "q_b", "kv_a", "kv_b"),
        *("router", "expert_gate", "expert_up", "expert_gate_up", "expert_down"),
        *("shared_gate", "shared_up", "shared_down"),
    }
)
"""Linear roles whose weights full fine-tuning trains (a linear keeps its input for its
weight's gradient only when that weight is trained)."""


def trainability(plan: Plan) -> Trainability:
    """Trainability of the base model and adapters under the plan's method."""
    kept = kept_input_roles(plan.method, plan.runtime.bitsandbytes_version)
    return _trainability(plan.method, plan.model.architecture.tied_embeddings, kept)


def _trainability(m: MethodSection, tied: bool, kept: frozenset[str] = frozenset()) -> Trainability:
    """:func:`trainability` from exactly what it reads (a handful of field reads: not
    worth a cache lookup, which hashes the method section)."""
    drop = (m.dropout or 0.0) > 0
    if m.kind == "full":
        return Trainability(True, True, True, ALL_LINEAR_ROLES, frozenset(), dropout=drop)
    if m.kind == "custom":
        roles = frozenset(m.custom.roles)
        return Trainability(
            "embedding" in roles,
            "norm" in roles,
            "lm_head" in roles or ("embedding" in roles and tied),
            roles & ALL_LINEAR_ROLES,
            frozenset(),
            dropout=drop,
        )
    # PEFT wraps the modules whose tensor role is a target, literally: "q" adapts a
    # separate q_proj, "qkv" a fused one (engine/ledger/states/lora.py is_target);
    # LitGPT's q / k / v flags are parts of one adapter on its fused qkv linear
    adapters = frozenset(m.lora.targets)
    parts = litgpt_parts(m.lora)
    if parts:
        adapters = (adapters - parts) | {"qkv"}
    return Trainability(
        embedding=False,
        norms=False,
        lm_head=False,
        linear_roles=frozenset(),
        adapter_roles=frozenset(adapters),
        rank=m.lora.rank,
        # a master-weights engine (DeepSpeed) casts the adapters to the working dtype
        adapter_bytes=DTYPE_BYTES[
            m.precision.compute_dtype
            if m.precision.policy == "amp_master"
            else m.lora.adapter_dtype
        ],
        adapter_dropout=m.lora.dropout > 0,
        dropout=drop,
        kept_inputs=kept,  # library_versions: an old bitsandbytes' 4-bit linears
        fused_parts=parts,
    )


@lru_cache(maxsize=256)
def geometry(plan: Plan) -> Geometry:
    """The local shapes of one micro-batch under the plan's TP / SP / CP (of a plan whose
    stack defaults are resolved). Cached: every row builder of an estimate asks for it
    (a plan left at ``auto`` raises, and an exception is never cached). Everything but
    the micro-batch's shape comes from the :func:`~engine.ledger.shape_free.shape_free`
    plan's geometry, worked out once for all plans that differ only in that shape."""
    base = shape_free_geometry(shape_free(plan))
    b = plan.batch
    seq = ceil_div(b.seq_len, plan.parallelism.cp)
    return _new_geometry((b.micro_batch, seq, *base[2:]))


_new_geometry = partial(tuple.__new__, Geometry)
"""``Geometry`` from a tuple of its fields, built in C (no Python ``__new__`` frame)."""


def at_shape(g: Geometry, micro_batch: int, seq: int) -> Geometry:
    """``g`` at a micro-batch of ``micro_batch`` sequences of ``seq`` local tokens."""
    return _new_geometry((micro_batch, seq, *g[2:]))


def shape_free_geometry(plan: Plan) -> Geometry:
    """:func:`geometry` of a shape-free plan (its micro-batch and sequence are 1 each):
    built from that plan, so a field here that read the shape would be wrong at once
    (kept in its memo, :func:`~engine.ledger.shape_free.free_memo`)."""
    return free_memo(plan).get("geometry", _shape_free_geometry, shape_free(plan))


def _shape_free_geometry(plan: Plan) -> Geometry:
    require_resolved(plan)
    arch, par, prec = plan.model.architecture, plan.parallelism, plan.method.precision
    compute = DTYPE_BYTES[prec.compute_dtype]
    # FSDP's mixed-precision policy casts the *parameters* to the compute dtype once per
    # unit, so activations are plain 16-bit as in pure 16-bit training — no per-matmul
    # autocast casts (measured: FSDP2 cases match pure bf16).
    autocast = prec.policy == "autocast" and not rule_of(par.strategy).fsdp
    if prec.policy in ("fp32", "autocast"):
        embed = 4 if (prec.policy == "fp32" or autocast) else compute
    else:
        embed = compute
    inter, moe, mla = arch.intermediate, None, None
    head_dim, kv_heads, v_head = arch.dim_per_head, arch.kv_heads, 0
    if arch.moe is not None:
        m = arch.moe
        routed = round(m.top_k * m.expert_intermediate * m.capacity_factor)
        shared = m.shared_experts * (m.shared_intermediate or m.expert_intermediate)
        inter = routed + shared
        moe = MoeGeometry(m.num_experts, m.top_k, m.capacity_factor)
    if arch.mla is not None:
        a = arch.mla
        head_dim = a.qk_nope_head_dim + a.qk_rope_head_dim
        kv_heads, v_head = arch.heads, a.v_head_dim  # latents expand to every head
        mla = MlaGeometry(
            a.q_lora_rank or 0,
            a.kv_lora_rank,
            a.qk_rope_head_dim,
            a.qk_nope_head_dim + a.v_head_dim,
        )
    return Geometry(
        micro_batch=plan.batch.micro_batch,
        seq=ceil_div(plan.batch.seq_len, par.cp),
        hidden=arch.hidden,
        heads=arch.heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        inter=inter,
        vocab=arch.vocab,
        tp=par.tp,
        sp=par.sequence_parallel and par.tp > 1,
        compute_bytes=compute,
        embed_bytes=embed,
        autocast=autocast,
        granularity=plan.runtime.allocation_granularity_bytes,
        v_head_dim=v_head,
        gathered_logits=par.tp > 1 and par.tp_style != "vocab_parallel",
        moe=moe,
        mla=mla,
    )


@dataclass(frozen=True, slots=True)
class Term:
    """``count`` saved tensors of ``width`` elements per token at ``bpe`` bytes each."""

    name: str
    width: int
    bpe: int
    axis: TokenAxis = "full"
    count: int = 1

    def tokens(self, g: Geometry) -> int:
        axis = self.axis
        if axis == "full":
            return g.micro_batch * g.seq
        return g.seq_tokens if axis == "seq" else 1

    def bytes(self, g: Geometry) -> int:
        return self.count * round_up(self.tokens(g) * self.width * self.bpe, g.granularity)

    def describe(self, g: Geometry) -> str:
        n = f"{self.count} × " if self.count > 1 else ""
        if self.axis == "const":
            return f"{self.name} {n}{self.width}·{self.bpe}"
        return f"{self.name} {n}{self.tokens(g)}·{self.width}·{self.bpe}"


def terms_bytes(terms: Iterable[Term], g: Geometry) -> int:
    """The sum of the terms' :meth:`Term.bytes` — written plainly: the estimate sums
    terms through :func:`terms_at`, and the tests check that against this."""
    return sum(t.bytes(g) for t in terms)


class TermsAt(NamedTuple):
    """:func:`terms_bytes` of fixed terms as a function of the micro-batch's size, at
    one local sequence, TP, sequence parallelism and allocation granularity
    (:func:`terms_at`): the terms whose rounding never bites (their bytes a multiple of
    the granularity at every size) summed into bytes per sequence (``linear``) and a
    constant (``const``); the others (``rest``: axis, count, bytes per token) rounded
    one by one, as :func:`terms_bytes` does."""

    linear: int
    const: int
    rest: tuple[tuple[TokenAxis, int, int], ...]
    seq: int
    tp: int
    sp: bool
    granularity: int

    def bytes(self, micro_batch: int) -> int:
        """The terms' bytes at a micro-batch of ``micro_batch`` sequences."""
        total = self.const + micro_batch * self.linear
        rest = self.rest
        if rest:
            full = micro_batch * self.seq
            seq = -(-full // self.tp) if self.sp else full  # Geometry.seq_tokens
            gran = self.granularity
            for axis, count, per in rest:
                n = (full if axis == "full" else seq) * per
                total += count * (-(-n // gran) * gran if gran > 1 else n)
        return total


def terms_at(terms: Iterable[Term], g: Geometry) -> TermsAt:
    """:class:`TermsAt` of ``terms`` at ``g``'s local sequence, TP, sequence parallelism
    and granularity (its micro-batch's size unread). A term of ``per`` bytes a token
    holds ``tokens × per`` bytes; at ``b`` sequences its tokens are ``b × seq`` (``full``,
    or ``seq`` without sequence parallelism) or ``b × seq / tp`` (``seq`` under it, when
    TP divides the sequence), so when one sequence's bytes are a multiple of the
    granularity, every size's are, and rounding leaves them as they are: bytes per
    sequence. ``const`` terms are rounded once. Any other term stays in ``rest``."""
    seq, tp, sp, gran = g.seq, g.tp, g.sp, g.granularity
    linear = const = 0
    rest: list[tuple[TokenAxis, int, int]] = []
    for t in terms:
        per = t.width * t.bpe
        if t.axis == "const":
            const += t.count * round_up(per, gran)
            continue
        split = t.axis == "seq" and sp
        if split and seq % tp:
            rest.append((t.axis, t.count, per))
            continue
        one = (seq // tp if split else seq) * per  # one sequence's bytes
        if gran <= 1 or one % gran == 0:
            linear += t.count * one
        else:
            rest.append((t.axis, t.count, per))
    return TermsAt(linear, const, tuple(rest), seq, tp, sp, gran)


def terms_formula(terms: list[Term], g: Geometry) -> str:
    return " + ".join(t.describe(g) for t in terms)
