"""Trace torchtune's own single-device LoRA step (Llama 3.2 3B) on fake CPU tensors.

Runs what ``recipes/lora_finetune_single_device.py`` (torchtune 1814feb, the commit of the
README's "Optimization flags" table) runs for its LoRA row: the model built by
``torchtune.models.llama3_2.lora_llama3_2_3b`` as ``llama3_2/3B_lora_single_device.yaml``
configures it (q, v, output_proj + MLP, rank 64, alpha 128, dropout 0.0, bf16, tied
output through ``TiedLinear``), ``set_trainable_params``, activation checkpointing on each
``TransformerSelfAttentionLayer`` (``training.set_activation_checkpointing``), torchtune's
own ``OffloadActivations`` with its NoOp hook on the tied head
(``training.get_act_offloading_ctx_manager``), ``CEWithChunkedOutputLoss`` with the
model's ``num_output_chunks`` (8), the recipe's ``_loss_step`` and train loop (loss x
tokens, backward, ``scale_grads``, fused ``torch.optim.AdamW`` step — the config keeps
``fused: True`` when the README's command swaps the component —, ``zero_grad(set_to_none=True)``).
Two steps; the second is measured, its window opening after the first step's
``zero_grad`` as ``training.get_memory_stats`` resets the peak there.

What runs differently on a CPU-only torch, and how it is accounted:

- ``OffloadActivations`` runs as written; CUDA streams and events are inert stand-ins
  (one stream: every ``wait_event`` is already satisfied, so the stash deletions happen
  where the code deletes them), host copies are not counted, ``.to("cuda")`` is a fresh
  device copy, ``record_stream`` a no-op (tune_patches.py).
- compile (``compile=True``): inductor cannot run on fake tensors; the layers run eager.
  That changes only a recomputed layer's working set, not what is live at the loss.
  ``compile_loss`` compiles ``compute_cross_entropy`` alone; its AOT graph keeps the bf16
  chunk and an fp32 row logsumexp and returns a bf16 input gradient — modelled by
  :class:`CompiledChunkCE` (``--eager-loss`` runs torchtune's eager one instead).
- attention: on CPU ``_SUPPORTS_FLEX_ATTENTION`` is false and the model calls causal SDPA
  (packed batches' block mask dropped), whose CPU flash kernel keeps the output and an
  fp32 logsumexp, the saved set of flex attention.
- the RoPE cache: ``Llama3ScaledRoPE.rope_init`` returns early on meta; the buffers are
  registered with their shapes after ``to_empty`` (cache fp32 [131072, 64, 2]).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import re
import sys
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from tests.trace.tune_live import LiveBytes, by_label
from tests.trace.tune_patches import CompiledChunkCE, device_copies_in, offload_stand_ins

GiB = 1 << 30
IGNORE = -100


BUILDERS = {
    "3b": ("torchtune.models.llama3_2", "lora_llama3_2_3b"),
    "8b": ("torchtune.models.llama3_1", "lora_llama3_1_8b"),
}
"""The recipe configs' ``model._component_`` (llama3_2/3B_lora_single_device.yaml,
llama3_1/8B_lora_single_device.yaml)."""


def build(args: argparse.Namespace, fake: FakeTensorMode) -> Any:
    """The model as the recipe's _setup_model leaves it, materialised on fake CPU.

    Built on meta outside the tracker (a storage with a weak reference cannot be swapped
    by ``to_empty``), materialised under ``fake``."""
    import importlib

    from torchtune import modules, training
    from torchtune.modules.peft import get_adapter_params, set_trainable_params

    module, name = BUILDERS[args.model]
    builder = getattr(importlib.import_module(module), ("q" if args.qlora else "") + name)
    kwargs = {
        "lora_attn_modules": args.attn.split(","),
        "apply_lora_to_mlp": not args.no_mlp,
        "lora_rank": args.rank,
        "lora_alpha": args.alpha,
        "lora_dropout": 0.0,
    }
    nf4_homes = [
        importlib.import_module("torchtune.modules.low_precision.nf4_linear"),
        importlib.import_module("torchtune.modules.peft.lora"),
    ]
    to_nf4 = nf4_homes[0].to_nf4
    for home in nf4_homes:  # torchao's to_nf4 cannot run on meta: quantized after to_empty
        home.to_nf4 = lambda w, **_: w
    try:
        with training.set_default_dtype(torch.bfloat16), torch.device("meta"):
            model = builder(**kwargs)
    finally:
        for home in nf4_homes:
            home.to_nf4 = to_nf4
    set_trainable_params(model, get_adapter_params(model))
    training.set_activation_checkpointing(
        model, auto_wrap_policy={modules.TransformerSelfAttentionLayer}
    )
    with fake:
        model.to_empty(device="cpu")
        for mod in model.modules():
            if type(mod).__name__ == "Llama3ScaledRoPE":
                rope_shapes(mod)
            quantized = type(mod).__name__ == "FrozenNF4Linear" or getattr(
                mod, "_quantize_base", False
            )
            if quantized:
                nf4 = to_nf4(mod.weight.detach())
                mod.weight = torch.nn.Parameter(nf4, requires_grad=False)
    return model


def rope_shapes(rope: Any) -> None:
    """Llama3ScaledRoPE's buffers with their shapes and dtype (fp32: theta from
    ``.float()``, cache [max_seq_len, dim // 2, 2]); values do not matter on fake tensors."""
    half = rope.dim // 2
    rope.register_buffer("theta", torch.empty(half, dtype=torch.float32), persistent=False)
    cache = torch.empty(rope.max_seq_len, half, 2, dtype=torch.float32)
    rope.register_buffer("cache", cache, persistent=False)
    rope.is_cache_built = True


def count_states(model: Any, live: LiveBytes) -> None:
    """Put the parameters and buffers in the tracker, labelled adapter / frozen / buffer."""
    for name, p in model.named_parameters():
        label = f"param:{'adapter' if p.requires_grad else 'frozen'}:{name}"
        if hasattr(p, "__tensor_flatten__"):  # torchao's NF4Tensor: its inner tensors
            for attr in p.__tensor_flatten__()[0]:
                live.add(getattr(p, attr), f"{label}.{attr}")
        else:
            live.add(p, label)
    for name, b in model.named_buffers():
        live.add(b, f"buffer:{name}")


def label_modules(model: Any, live: LiveBytes) -> None:
    """Name the top-level module a forward op runs in (layers.i, norm, output)."""

    def enter(name: str) -> Any:
        def hook(*_: Any) -> None:
            live.where = name

        return hook

    for name, mod in model.named_children():
        if name == "layers":
            for i, layer in enumerate(mod):
                layer.register_forward_pre_hook(enter(f"layers.{i}"))
        elif isinstance(mod, torch.nn.Module):
            mod.register_forward_pre_hook(enter(name))
    model.norm.register_forward_hook(lambda *_: setattr(live, "where", "output"))


def offload_ctx(model: Any, args: argparse.Namespace) -> Any:
    """The recipe's offloading context: ``training.get_act_offloading_ctx_manager`` where
    the installed torchtune has it (e99b89007 on), else what the recipe did inline before
    it (an ``OffloadActivations()`` and the NoOp hooks on an ``nn.Module`` head only, so a
    ``TiedLinear`` head of that time was offloaded); ``--streams on|off`` builds
    ``OffloadActivations(use_streams=...)`` with the same head hooks."""
    from torchtune import training
    from torchtune.training import NoOpManager, OffloadActivations

    if args.no_offload:
        return contextlib.nullcontext()
    recipe_helper = hasattr(training, "get_act_offloading_ctx_manager")
    if args.streams == "default" and recipe_helper:
        return device_copies_in(training.get_act_offloading_ctx_manager(model, True))
    kwargs = {} if args.streams == "default" else {"use_streams": args.streams == "on"}
    ctx = OffloadActivations(**kwargs)
    head = model.output
    if not isinstance(head, torch.nn.Module):
        head = head.linear if recipe_helper else None
    if head is not None:
        noop = NoOpManager()
        head.register_forward_pre_hook(lambda *_: noop.__enter__())
        head.register_forward_hook(lambda *_: noop.__exit__(), always_call=True)
    return device_copies_in(ctx)


def run(args: argparse.Namespace) -> LiveBytes:
    from torchtune import training
    from torchtune.modules.loss import CEWithChunkedOutputLoss

    live = LiveBytes()
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    model = build(args, fake)
    with fake, live, offload_stand_ins(live):
        count_states(model, live)
        label_modules(model, live)
        loss_fn = CEWithChunkedOutputLoss()
        if not args.eager_loss:
            loss_fn.compute_cross_entropy = CompiledChunkCE.compute
        model.set_num_output_chunks(loss_fn.num_output_chunks)
        ctx = offload_ctx(model, args)
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=3e-4, weight_decay=0.01, fused=True)
        b, s = args.batch, args.seq
        ignore_cache = torch.full((b, 1), IGNORE, dtype=torch.long)
        gc.disable()
        for step in range(2):
            if step == 1:
                live.recording = True
                live.phase = "step2.forward"
                live.reset_peak()
            pre = "step2." if step else ""
            live.phase, live.where = pre + "forward", "batch"
            tokens = torch.zeros(b, s, dtype=torch.long)
            labels = torch.zeros(b, s, dtype=torch.long)
            input_pos = torch.zeros(b, s, dtype=torch.long)
            num_tokens = (labels != IGNORE).sum()
            with ctx:
                logits = model(tokens, mask=None, input_pos=input_pos)
            live.phase, live.where = pre + "loss", "loss"
            labels = torch.hstack((labels[..., 1:], ignore_cache[:b]))
            loss = loss_fn(logits, labels)
            del logits
            current = loss * num_tokens
            live.mark(pre + "backward")
            current.backward()
            del loss, current
            live.phase, live.where = pre + "step", "optimizer"
            if hasattr(training, "scale_grads"):  # 23c8829ac (2024-10-25) on
                training.scale_grads(model, 1 / num_tokens)
            opt.step()
            opt.zero_grad(set_to_none=True)
            gc.collect()
            live.phase = pre + "end"
        gc.enable()
    return live


def report(live: LiveBytes, top: int) -> str:
    lines = [f"peak {live.peak / GiB:.4f} GiB ({live.peak:,} B) at {live.peak_at}"]
    groups = by_label(live.peak_live, 2)
    for name, n in groups.most_common(top):
        lines.append(f"  {n / GiB:8.4f} GiB  {n:>14,}  {name}")
    at_loss = live.marks["step2.backward"]
    lines.append(f"live at the loss (backward's start): {at_loss / GiB:.4f} GiB ({at_loss:,} B)")
    for name, n in by_label(live.mark_live["step2.backward"], 2).most_common(top):
        lines.append(f"  {n / GiB:8.4f} GiB  {n:>14,}  {name}")
    lines.append("highest total under each phase and module / autograd node:")
    folded: dict[str, int] = {}
    for at, n in live.phase_peaks.items():
        key = re.sub(r"\.\d+", ".*", at)
        folded[key] = max(folded.get(key, 0), n)
    for at, n in sorted(folded.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"  {n / GiB:8.4f} GiB  {at}")
    return "\n".join(lines)


def main_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; the defaults are the 3B LoRA row's configuration."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(BUILDERS), default="3b")
    ap.add_argument("--attn", default="q_proj,v_proj,output_proj")
    ap.add_argument("--no-mlp", action="store_true")
    ap.add_argument("--qlora", action="store_true", help="the qlora_ builder (torchao NF4 base)")
    ap.add_argument("--rank", type=int, default=64)
    ap.add_argument("--alpha", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--eager-loss", action="store_true")
    ap.add_argument("--no-offload", action="store_true")
    ap.add_argument("--streams", choices=["default", "on", "off"], default="default")
    ap.add_argument("--top", type=int, default=40)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = main_args(argv)
    print(report(run(args), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
