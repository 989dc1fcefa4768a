"""Trace torchtune's FSDP2 LoRA step (Llama 3.1 70B, 8 ranks) on fake CPU tensors.

What ``recipes/lora_finetune_distributed.py`` at 30b8519 (the README memory table's
commit) runs for ``llama3_1/70B_lora``: ``lora_llama3_1_70b`` (q, k, v, rank 16, alpha 32,
no MLP adapters, bf16), ``set_trainable_params``, activation checkpointing on each
``TransformerSelfAttentionLayer``, ``training.shard_model`` (``fully_shard`` on each
``layers.i`` bottom-up, then the root; ``reshard_after_forward`` True), the chunked
loss (8 chunks, the compiled ``compute_cross_entropy``'s saved set, tune_patches.py),
fused AdamW over the adapters, two steps, rank 0 of a fake 8-rank process group
(shared/reference/tracing.md). One CPU stream: FSDP2's prefetches are issued where its
code issues them (the root's pre-backward prefetches layer 79, each layer's the next),
but a GPU can keep an all-gather buffer a little longer (events), so this is the
sequential floor. Compile does not run (see tune_lora_step.py).
"""

from __future__ import annotations

import argparse
import gc
import sys
from typing import Any

import torch
import torch.distributed as dist
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.distributed.tensor._sharding_prop import ShardingPropagator
from torch.testing._internal.distributed.fake_pg import FakeStore

from tests.trace.tune_live import LiveBytes
from tests.trace.tune_lora_step import IGNORE, label_modules, report, rope_shapes
from tests.trace.tune_patches import CompiledChunkCE

_depth = [0]


def _counting(original: Any) -> Any:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            _depth[0] -= 1

    return wrapper


def _is_layer_name(name: str, module: Any) -> bool:
    """The recipe's shard condition: ``layers.i`` (AC-wrapped or not)."""
    parts = name.split(".")
    return len(parts) == 2 and parts[0] == "layers" and parts[1].isdigit()


def build(args: argparse.Namespace, fake: FakeTensorMode) -> Any:
    from torchtune import modules, training
    from torchtune.models.llama3_1 import lora_llama3_1_70b
    from torchtune.modules.peft import get_adapter_params, set_trainable_params

    with training.set_default_dtype(torch.bfloat16), torch.device("meta"):
        model = lora_llama3_1_70b(
            lora_attn_modules=args.attn.split(","),
            apply_lora_to_mlp=False,
            lora_rank=args.rank,
            lora_alpha=args.alpha,
            lora_dropout=0.0,
        )
    set_trainable_params(model, get_adapter_params(model))
    training.set_activation_checkpointing(
        model, auto_wrap_policy={modules.TransformerSelfAttentionLayer}
    )
    training.shard_model(model, [_is_layer_name], cpu_offload=False, reshard_after_forward=True)
    if not args.root_reshards:
        # torch 2.4 / 2.5 (the run's): FSDPState._lazy_init sets the root's
        # post_forward_mesh_info None whatever the user passed; torch 2.13 does so only
        # when reshard_after_forward was left unset (_auto_reshard_after_forward)
        model._get_fsdp_state()._auto_reshard_after_forward = True
    with fake:
        model.to_empty(device="cpu")
        for mod in model.modules():
            if type(mod).__name__ == "Llama3ScaledRoPE":
                rope_shapes(mod)
    return model


def run(args: argparse.Namespace) -> LiveBytes:
    from torchtune.modules.loss import CEWithChunkedOutputLoss

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=args.world)
    live = LiveBytes()
    live.paused = lambda: _depth[0] > 0  # DTensor's propagation: not allocations
    prop = ShardingPropagator._propagate_tensor_meta_non_cached
    ShardingPropagator._propagate_tensor_meta_non_cached = _counting(prop)  # type: ignore[method-assign]
    resize = torch.UntypedStorage.resize_

    def resize_(storage: Any, nbytes: int) -> Any:
        out = resize(storage, nbytes)
        live.resized(storage, nbytes)
        return out

    torch.UntypedStorage.resize_ = resize_  # type: ignore[method-assign]
    fake = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        model = build(args, fake)
        with fake, live:
            for name, p in model.named_parameters():
                live.add(p, f"param:{'adapter' if p.requires_grad else 'frozen'}:{name}")
            for name, b in model.named_buffers():
                live.add(b, f"buffer:{name}")
            label_modules(model, live)
            loss_fn = CEWithChunkedOutputLoss()
            loss_fn.compute_cross_entropy = CompiledChunkCE.compute  # type: ignore[method-assign]
            model.set_num_output_chunks(loss_fn.num_output_chunks)
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
                live.phase = pre + "forward"
                tokens = torch.zeros(b, s, dtype=torch.long)
                labels = torch.zeros(b, s, dtype=torch.long)
                logits = model(tokens)
                live.phase = pre + "loss"
                labels = torch.hstack((labels[..., 1:], ignore_cache[:b]))
                loss = loss_fn(logits, labels)
                del logits
                live.mark(pre + "backward")
                loss.backward()
                del loss
                live.phase = pre + "step"
                opt.step()
                opt.zero_grad(set_to_none=True)
                gc.collect()
            gc.enable()
    finally:
        ShardingPropagator._propagate_tensor_meta_non_cached = prop  # type: ignore[method-assign]
        torch.UntypedStorage.resize_ = resize  # type: ignore[method-assign]
        dist.destroy_process_group()
    return live


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--attn", default="q_proj,k_proj,v_proj")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=int, default=32)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--root-reshards", action="store_true", help="torch 2.13's root rule")
    args = ap.parse_args(argv)
    print(report(run(args), args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
