"""Training methods as branches: which tensors a rank holds, and which are trainable.

Full training trains everything; a custom subset trains chosen roles (or a bare count);
LoRA and QLoRA freeze the base and add adapters. Frozen tensors get no gradient or
optimizer rows.
"""

from __future__ import annotations

from operator import attrgetter

from engine.errors import PlanError
from engine.ledger.held import Category, HeldTensor
from engine.ledger.placement import LocalTensor, dense_dp_group, expert_dp_group
from engine.ledger.precision import StateFormats
from engine.ledger.sharding import shard_group_size
from engine.ledger.states.lora import adapter_shapes, is_target
from engine.ledger.states.quantized import is_quantized
from engine.models.inventory import Tensor
from engine.sections.method import MethodSection
from engine.sections.parallel import ParallelismSection

_new = tuple.__new__
"""A named tuple from its fields in order, built in C (:meth:`_Builder.add_local`)."""

_EXPERT = attrgetter("expert")
"""Whether a placed tensor is a routed expert's (read in C)."""


def _unit(t: Tensor) -> str:
    return f"layer.{t.layer}" if t.layer is not None else "root"


class _Builder:
    """Collects HeldTensors with dtypes decided by the precision policy."""

    def __init__(
        self, par: ParallelismSection, formats: StateFormats, dense: int, expert: int
    ) -> None:
        self.formats = formats
        self.dense, self.expert = dense, expert
        self.threshold = (
            par.knobs.ds_param_persistence_threshold if (par.strategy == "zero3") else 0
        )
        self.out: list[HeldTensor] = []
        self._dtypes: dict[str, tuple[str, str]] = {}  # param dtype → (grad, state) dtypes

    def add(
        self,
        name: str,
        shape: tuple[int, ...],
        unit: str,
        category: Category,
        trainable: bool,
        dtype: str,
        expert: bool = False,
        full_numel: int = 0,
        count: int = 1,
    ) -> None:
        self.out.append(
            HeldTensor(
                name=name,
                shape=shape,
                unit=unit,
                category=category,
                trainable=trainable,
                param_dtype=dtype,
                grad_dtype=self.formats.grad_dtype_for(dtype),
                state_dtype=self.formats.state_dtype_for(dtype),
                group=self.expert if expert else self.dense,
                persistent_full=0 < full_numel < self.threshold,
                count=count,
                expert=expert,
            )
        )

    def add_local(self, t: LocalTensor, category: Category, trainable: bool, dtype: str) -> None:
        """:meth:`add` of a placed tensor, its held tensor built in C from the placed
        one's fields (every stage of a layout search holds tens of them, each new)."""
        tensor = t.tensor
        dtypes = self._dtypes.get(dtype)
        if dtypes is None:
            dtypes = self._dtypes[dtype] = (
                self.formats.grad_dtype_for(dtype),
                self.formats.state_dtype_for(dtype),
            )
        self.out.append(
            _new(
                HeldTensor,
                (
                    tensor.name,
                    t.shape,
                    f"layer.{tensor.layer}" if tensor.layer is not None else "root",  # _unit
                    category,
                    trainable,
                    dtype,
                    *dtypes,
                    self.expert if t.expert else self.dense,
                    self.threshold > 0 and 0 < tensor.numel < self.threshold,
                    t.count,
                    t.expert,
                    t.numel,  # prod(t.shape), as HeldTensor works it out
                ),
            )
        )


def held_tensors(
    method: MethodSection,
    par: ParallelismSection,
    ranks_per_node: int,
    placed: tuple[LocalTensor, ...],
    formats: StateFormats,
    groups: tuple[int, int] | None = None,
) -> tuple[list[HeldTensor], str]:
    """The rank's tensors with trainability and dtypes, and the words for its divisor.

    The divisor is the size of the group that really shards each tensor: the dense
    data-parallel group (DP × CP × EP) for dense tensors, DP × CP for routed experts,
    or the hybrid shard group under HSDP. ``groups`` gives the (dense, expert) sizes
    when the caller has worked them out (then ``par``'s DP and CP are not read).
    """
    if groups is None:
        dense = shard_group_size(par, dense_dp_group(par), ranks_per_node)
        expert = shard_group_size(par, expert_dp_group(par), ranks_per_node)
    else:
        dense, expert = groups
    b = _Builder(par, formats, dense, expert)
    base = formats.param

    if method.kind == "full":
        no_master = formats.master is None
        add = b.add_local
        for t in placed:
            tensor = t.tensor
            # a tensor the training code keeps in fp32 (Tensor.keep_fp32) stays fp32 over a
            # 16-bit model; a master-weights engine casts every parameter to its working dtype
            kept = "fp32" if tensor.keep_fp32 and no_master else base
            add(t, "frozen" if tensor.buffer else "model", not tensor.buffer, kept)
    elif method.kind == "custom":
        _custom(method, par, placed, b, base)
    else:
        lora = method.lora
        qlora = method.kind == "qlora"
        q = method.qlora
        # A master-weights engine (DeepSpeed bf16.enabled) casts every floating parameter
        # to its working dtype after peft built the model, adapters and peft's fp32
        # upcasts included (runtime/engine.py _cast_module_mixed_precision).
        cast_all = formats.master is not None
        upcast = "fp32" if q.upcast_non_quantized else q.compute_dtype
        adapter_dtype = base if cast_all else lora.adapter_dtype
        for t in placed:
            if qlora and is_quantized(t.tensor, q.quantize_lm_head):
                b.add_local(t, "quantized", False, "nf4")
            elif qlora:
                b.add_local(t, "frozen", False, base if cast_all else upcast)
            else:
                b.add_local(t, "frozen", False, base)
            if is_target(t.tensor, lora):
                for name, shape in adapter_shapes(t, lora):
                    b.add(
                        name,
                        shape,
                        _unit(t.tensor),
                        "adapters",
                        True,
                        adapter_dtype,
                        t.expert,
                        count=t.count,
                    )
        if not any(h.category == "adapters" for h in b.out) and par.pp == 1:
            raise PlanError(
                f"method.lora.targets {list(lora.targets)} match no tensor of this model "
                f"(roles present: {sorted({t.tensor.role for t in placed})})"
            )
    return b.out, group_words(placed, dense, expert)


def group_words(placed: tuple[LocalTensor, ...], dense: int, expert: int) -> str:
    """The words for the divisors of these tensors' shards (rows' formulas)."""
    return group_words_of(any(map(_EXPERT, placed)), dense, expert)


def group_words_of(experts: bool, dense: int, expert: int) -> str:
    """:func:`group_words` of placed tensors of which some are routed experts' when
    ``experts`` (what a placement knows once for all its shard group sizes)."""
    if expert != dense and experts:
        return f"{dense} dense / {expert} expert (data-parallel shard groups)"
    return f"{dense} (data-parallel shard group)"


def _custom(
    method: MethodSection,
    par: ParallelismSection,
    placed: tuple[LocalTensor, ...],
    b: _Builder,
    dtype: str,
) -> None:
    custom = method.custom
    roles = set(custom.roles)
    if roles & {"expert_gate", "expert_up"}:
        # a fused gate_up experts tensor is one parameter: trained with either half
        roles.add("expert_gate_up")
    if roles:
        for t in placed:
            b.add_local(
                t, "model" if t.tensor.role in roles else "frozen", t.tensor.role in roles, dtype
            )
        if not any(h.trainable for h in b.out) and par.pp == 1:
            raise PlanError(f"method.custom.roles {sorted(roles)} match no tensor of this model")
        return
    if custom.count is None:
        raise PlanError("method.custom needs roles or a trainable count")
    total = sum(t.numel * t.count for t in placed)
    full_total = sum(t.tensor.numel * t.count for t in placed)
    for t in placed:
        b.add_local(t, "frozen", False, dtype)
    # The count is over the whole model; this rank's share scales with what it holds.
    share = custom.count * total // max(full_total, 1) if full_total else 0
    share = min(share, total)
    if share:
        b.add("custom-trainable", (share,), "root", "virtual", True, dtype)
