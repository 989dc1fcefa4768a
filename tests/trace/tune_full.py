"""Trace torchtune's own full fine-tune step on fake tensors, op by op (issue 35).

What runs is torchtune's code (the pip release nearest the README table's commit
1814feb: torchtune 0.4.0, torchao 0.6.1): ``llama3_2`` built as
``recipes/full_finetune_single_device.py`` ``_setup_model`` builds it (bf16, tied
embedding through ``TiedLinear``, ``set_num_output_chunks``,
``training.set_activation_checkpointing`` on every ``TransformerSelfAttentionLayer``),
``_setup_optimizer``'s per-parameter AdamW with ``training.register_optim_in_bwd_hooks``
(optimizer_in_bwd), ``training.OffloadActivations`` with the output head under its
``NoOpManager`` (activation offloading), ``CEWithChunkedOutputLoss`` and the recipe's
``_loss_step`` / ``train`` step (``del logits``, ``loss * num_tokens``, ``backward``,
``step`` + ``zero_grad(set_to_none=True)`` when the step is not in backward).

What stands in for what a CPU cannot run:

- **compiled loss**: ``compile_loss`` compiles ``compute_cross_entropy`` alone; the
  stand-in (:class:`CompiledCE`) allocates what that graph keeps and makes — it saves
  its bf16 input and two fp32 per-row statistics, and its backward writes one bf16
  gradient of the chunk — and nothing Inductor fuses away (the fp32 copy, the
  log-probs);
- **compiled layers** run eager (they are checkpointed: only the layer input is kept,
  and the peak this script looks for is at the head);
- **CUDA streams and the host copies** of ``OffloadActivations``: the module's ``torch``
  is a proxy whose ``cuda`` streams are no-ops and whose ``empty_like(...,
  device="cpu")`` is a :class:`HostCopy` — host memory, not counted — that ``.to()``
  brings back as a new device tensor (counted). Everything else (the ids, the forward
  stash and its window, the node hooks that empty it) is torchtune's own code;
- **the input buffer's in-place sums**: a fake tensor is a tensor subclass, so
  ``InputBuffer::accumulate`` (torch/csrc/autograd/input_buffer.cpp) adds every gradient
  out of place here; on a GPU only the first sum of lm_head's chunk gradients is (its
  operands are views), the later ones add in place — their moments are lower than the
  first's, which this trace shows as it is.

Run: ``timeout 600 .venv/bin/python -m tests.trace.tune_full [opt-in-bwd|act-offload|ac]``.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed._tools.common_utils import get_untyped_storages
from torch.utils.weak import WeakIdKeyDictionary

from engine.trace.patches import trace_patches
from engine.trace.tracker import PlainTracker

MiB, GiB = 2**20, 2**30


@dataclass(frozen=True, slots=True)
class Shape:
    """The model and batch (llama3_2_3b's builder figures and the table's batch)."""

    layers: int = 28
    hidden: int = 3072
    heads: int = 24
    kv_heads: int = 8
    inter: int = 8192
    vocab: int = 128_256
    max_seq_len: int = 131_072
    seq: int = 4096
    batch: int = 2
    chunks: int = 8


@dataclass(frozen=True, slots=True)
class Knobs:
    """The table row's techniques on top of AC (every row adds to the one above)."""

    optimizer_in_bwd: bool = True
    offload: bool = False
    compiled_loss: bool = True


CASES: dict[str, Knobs] = {
    "ac": Knobs(optimizer_in_bwd=False),
    "opt-in-bwd": Knobs(),
    "act-offload": Knobs(offload=True),
}


class CompiledCE(torch.autograd.Function):
    """What the compiled ``compute_cross_entropy`` graph keeps and makes (module doc)."""

    @staticmethod
    def forward(ctx: Any, logits: Any, labels: Any) -> Any:
        rows = logits.shape[0]
        stats = [logits.new_empty((rows, 1), dtype=torch.float32) for _ in range(2)]
        ctx.save_for_backward(logits, *stats)
        return logits.new_empty((), dtype=torch.float32)

    @staticmethod
    def backward(ctx: Any, grad: Any) -> Any:
        logits, _, _ = ctx.saved_tensors
        return torch.empty_like(logits), None


class HostCopy:
    """An offloaded tensor's pinned host copy: not device memory; ``.to()`` brings a new
    device tensor back (what ``OffloadActivations``' unpack allocates)."""

    def __init__(self, like: Any) -> None:
        self.shape, self.stride, self.dtype = like.shape, like.stride(), like.dtype

    def copy_(self, src: Any, non_blocking: bool = False) -> HostCopy:
        return self

    def to(self, *args: Any, **kwargs: Any) -> Any:
        return torch.empty_strided(self.shape, self.stride, dtype=self.dtype, device="cpu")


class _Stream:
    def wait_event(self, event: Any) -> None: ...
    def wait_stream(self, stream: Any) -> None: ...
    def record_event(self) -> object: ...


def _torch_proxy() -> Any:
    """The ``torch`` ``_activation_offloading`` sees: streams are no-ops, host copies
    are :class:`HostCopy`; the rest is torch."""
    cuda = types.SimpleNamespace(
        default_stream=lambda *a, **k: _Stream(),
        Stream=lambda *a, **k: _Stream(),
        stream=lambda s: contextlib.nullcontext(),
    )

    class Proxy(types.ModuleType):
        def __getattr__(self, name: str) -> Any:
            return getattr(torch, name)

    proxy = Proxy("torch")
    proxy.cuda = cuda  # type: ignore[attr-defined]
    proxy.empty_like = lambda t, **kw: HostCopy(t)  # type: ignore[attr-defined]
    return proxy


@dataclass
class Peak:
    total: int = -1
    where: str = ""
    index: int = -1
    live: list[tuple[int, str, str]] = field(default_factory=list)


class Timeline(PlainTracker):
    """PlainTracker recording every op's live total, and at the step's peak what is live
    (bytes, category, the op and module that made it)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, int]] = []
        self.made: Any = WeakIdKeyDictionary()
        self.peak = Peak()
        self.recording = False

    def _pre_fw_hook(self, module: Any, inputs: Any) -> None:
        """lm_head runs once per chunk: MemTracker's per-module statistics refuse a second
        call; this trace keeps only the global timeline, so the refusal is skipped."""
        with contextlib.suppress(NotImplementedError):
            super()._pre_fw_hook(module, inputs)

    def label(self, tensors: dict[str, Any]) -> None:
        for name, t in tensors.items():
            for st in get_untyped_storages(t):
                self.made[st] = name

    def _live(self) -> list[tuple[int, str, str]]:
        out = []
        for st, (winfo, _) in list(self._WINFO.items()):
            if winfo.mem_consumed:
                kind = str(getattr(winfo.reftype, "value", winfo.reftype))
                out.append((int(winfo.mem_consumed), kind, self.made.get(st, "?")))
        return out

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = super().__torch_dispatch__(func, types, args, kwargs)
        if not self.recording:
            return out
        node = torch._C._current_autograd_node()
        where = (
            f"backward {node.name()} #{node._sequence_nr()}, at {self._last_op}"
            if node is not None
            else self._moment()
        )
        for t in out if isinstance(out, list | tuple) else [out]:
            if isinstance(t, torch.Tensor):
                for st in get_untyped_storages(t):
                    if st not in self.made:
                        self.made[st] = where
        total = self._current_total()
        self.ops.append((where, total))
        if total > self.peak.total:
            self.peak = Peak(total, where, len(self.ops) - 1, self._live())
        return out


class _NoHandle:
    def remove(self) -> None: ...


@contextlib.contextmanager
def _no_module_grad_hooks() -> Iterator[None]:
    """ModTracker's multi-grad hooks (``register_multi_grad_hook`` on each module's
    inputs, mode "all") buffer every gradient of a module's inputs until the last one
    arrives: the chunked loss's 8 logit gradients would be held through lm_head's whole
    backward, the head's input gradients to the end — memory the real step never holds.
    The trace names backward moments by the autograd node instead."""
    from torch.distributed._tools import mod_tracker

    original = mod_tracker.register_multi_grad_hook
    mod_tracker.register_multi_grad_hook = lambda *a, **k: _NoHandle()
    try:
        yield
    finally:
        mod_tracker.register_multi_grad_hook = original


def _build(shape: Shape, knobs: Knobs) -> tuple[Any, Any]:
    from torchtune import modules, training
    from torchtune.models.llama3_2 import llama3_2

    with training.set_default_dtype(torch.bfloat16), torch.device("meta"):
        model = llama3_2(
            vocab_size=shape.vocab,
            num_layers=shape.layers,
            num_heads=shape.heads,
            num_kv_heads=shape.kv_heads,
            embed_dim=shape.hidden,
            max_seq_len=shape.max_seq_len,
            intermediate_dim=shape.inter,
            attn_dropout=0.0,
            norm_eps=1e-5,
            rope_base=500_000,
            scale_factor=32,
        )
    training.set_activation_checkpointing(
        model, auto_wrap_policy={modules.TransformerSelfAttentionLayer}
    )
    model.set_num_output_chunks(shape.chunks)
    return model, training


def _materialise(model: Any, shape: Shape) -> None:
    """to_empty on fake cpu; the shared RoPE's theta and cache (skipped on meta by
    ``rope_init``) made as the rope builds them (fp32)."""
    from torchtune.models.llama3_1._position_embeddings import Llama3ScaledRoPE

    model.to_empty(device="cpu")
    ropes = {id(m): m for m in model.modules() if isinstance(m, Llama3ScaledRoPE)}
    for rope in ropes.values():
        theta = torch.empty(rope.dim // 2, dtype=torch.float32)
        rope.register_buffer("theta", theta, persistent=False)
        rope.build_rope_cache(rope.max_seq_len)
        rope.is_cache_built = True


def _offload_ctx(model: Any, training: Any) -> Any:
    from torchtune.training import _activation_offloading as ao

    ao.torch = _torch_proxy()  # type: ignore[assignment]
    ctx = ao.OffloadActivations(use_pin_memory=False, use_streams=True)
    # the recipe's get_act_offloading_ctx_manager: the head under a NoOpManager
    noop = ao.NoOpManager()
    head = model.output.linear if isinstance(model.output, ao.TiedLinear) else model.output
    head.register_forward_pre_hook(lambda *a: noop.__enter__())
    head.register_forward_hook(lambda *a: noop.__exit__(), always_call=True)
    return ctx


@dataclass
class Traced:
    steady: int
    peak: Peak
    ops: list[tuple[str, int]]


def trace(knobs: Knobs, shape: Shape = Shape(), steps: int = 2) -> Traced:
    from torchtune.modules.loss import CEWithChunkedOutputLoss

    model, training = _build(shape, knobs)
    with (
        trace_patches(512),
        _no_module_grad_hooks(),
        FakeTensorMode(allow_non_fake_inputs=True),
    ):
        _materialise(model, shape)
        params = list(model.parameters())
        if knobs.optimizer_in_bwd:
            optims = {p: torch.optim.AdamW([p], lr=2e-5, fused=True) for p in params}
            training.register_optim_in_bwd_hooks(model=model, optim_dict=optims)
            opt_list: list[Any] = list(optims.values())
        else:
            opt_list = [torch.optim.AdamW(params, lr=2e-5, fused=True)]
        ctx = _offload_ctx(model, training) if knobs.offload else contextlib.nullcontext()
        loss_fn = CEWithChunkedOutputLoss(num_output_chunks=shape.chunks)
        if knobs.compiled_loss:
            loss_fn.compute_cross_entropy = lambda lg, lb, normalize=True: CompiledCE.apply(lg, lb)
        tokens = torch.randint(0, shape.vocab, (shape.batch, shape.seq))
        labels = torch.randint(0, shape.vocab, (shape.batch, shape.seq))
        ignore = torch.full((shape.batch, 1), -100, dtype=torch.long)
        tracker = Timeline()
        tracker.track_external(model, *opt_list, tokens, labels, ignore)
        names = {n: p for n, p in model.named_parameters()}
        names.update({f"buffer {n}": b for n, b in model.named_buffers()})
        with tracker:
            tracker.label(names)
            steady = 0
            for step in range(steps):
                gc.collect()
                if step == steps - 1:
                    tracker.recording = True
                    steady = tracker._current_total()
                with _no_gc():
                    _step(model, ctx, loss_fn, tokens, labels, ignore, knobs, opt_list)
    return Traced(steady, tracker.peak, tracker.ops)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    gc.disable()
    yield
    gc.enable()


def _step(
    model: Any,
    ctx: Any,
    loss_fn: Any,
    tokens: Any,
    labels: Any,
    ignore: Any,
    knobs: Knobs,
    opts: list[Any],
) -> None:
    """recipes/full_finetune_single_device.py ``_loss_step`` and ``train``'s step."""
    num_tokens = (labels != -100).sum()
    with ctx:
        logits = model(tokens)
    shifted = torch.hstack((labels[..., 1:], ignore[: labels.shape[0]]))
    loss = loss_fn(logits, shifted)
    del logits
    current = loss * num_tokens
    del loss
    current.backward()
    del current
    if not knobs.optimizer_in_bwd:
        for opt in opts:
            opt.step()
            opt.zero_grad(set_to_none=True)


def summary(t: Traced, top: int = 40) -> str:
    groups: dict[tuple[str, str], list[int]] = {}
    for nbytes, kind, made in t.peak.live:
        key = (kind, made if kind not in ("Parameter", "OptState") else "")
        groups.setdefault(key, []).append(nbytes)
    lines = [
        f"steady {t.steady:,} B = {t.steady / GiB:.4f} GiB",
        f"peak {t.peak.total:,} B = {t.peak.total / GiB:.4f} GiB at op #{t.peak.index}: "
        f"{t.peak.where}",
    ]
    rows = sorted(groups.items(), key=lambda kv: -sum(kv[1]))
    for (kind, made), sizes in rows[:top]:
        lines.append(f"  {sum(sizes) / MiB:10.1f} MiB  {len(sizes):4d} × {kind:10s} {made[:110]}")
    return "\n".join(lines)


def ledger_at(case_id: str, moment: str = "backward.start") -> str:
    """The published case's ledger rows live at ``moment`` (HBM, allocated), for the
    trace to be read against (the trace has no cuBLAS workspace: that row is shown)."""
    from engine.estimate import estimate
    from engine.validation.published import case_plan, load_cases

    case = next(c for c in load_cases() if c.id == case_id)
    stage = estimate(case_plan(case)).heaviest
    total = stage.moments[moment]  # type: ignore[index]
    lines = [f"ledger {case_id} at {moment}: {total.low:,}-{total.high:,} B"]
    for row in stage.rows:
        if row.location == "hbm" and moment in row.moments and row.high:
            lines.append(f"  {row.low:>15,} {row.high:>15,}  {row.id}")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    for name in argv or ["opt-in-bwd"]:
        print(f"== {name}: {CASES[name]}")
        print(summary(trace(CASES[name])), flush=True)
        print(ledger_at(f"torchtune-3b-full-{name}"), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
