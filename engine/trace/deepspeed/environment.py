"""The process environment DeepSpeed's engine needs to run on a CPU as rank r of N.

- ``DS_ACCELERATOR=cpu`` before DeepSpeed is imported (its op builders ask the
  accelerator at import time), and the CPU accelerator set explicitly in case it was
  imported before;
- ``LOCAL_RANK`` / ``RANK`` / ``WORLD_SIZE``: ``DeepSpeedEngine._do_args_sanity_check``
  asserts them (a launcher sets them);
- no shared-memory collective kernel: ``deepspeed/comm/torch.py`` ``build_shm_op``
  JIT-compiles a C++ op for the CPU backend's inference all-reduce (a compiler and
  minutes on this machine), which training never calls;
- collectives that write into an output DeepSpeed made with ``torch.empty`` leave it
  untouched under the fake process group, so those outputs are zeroed in place after
  each call (``zero_`` allocates nothing): uninitialised memory read as bf16 is often
  NaN, and DeepSpeed's bf16 ``check_grad_overflow`` would then skip every step — and
  with it the optimizer state the trace is meant to measure;
- DeepSpeed's communication backend (``deepspeed.comm.comm.cdb``) and the process
  groups it caches (``deepspeed/utils/groups.py``: ``_WORLD_GROUP``,
  ``_DATA_PARALLEL_GROUP``, …) are reset on exit, so the next trace in the process
  wraps its own fake process group rather than a destroyed one.

Everything is restored on exit.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

FILLED: tuple[str, ...] = (
    "reduce_scatter",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_base",
    "all_gather_coalesced",
    "reduce_scatter_tensor",
    "all_to_all",
)
"""``deepspeed/comm/torch.py`` ``TorchBackend`` collectives whose first argument is an
output (a tensor or a list of them)."""


def _cache(name: str, value: Any) -> bool:
    """A module global of ``deepspeed.utils.groups`` that caches process groups."""
    return not name.startswith("__") and (value is None or isinstance(value, dict))


def _zero(out: Any) -> None:
    import torch

    for t in out if isinstance(out, (list, tuple)) else [out]:
        if torch.is_tensor(t) and t.numel():
            t.zero_()


OUTPUT_NAMES: tuple[str, ...] = (
    "output",
    "tensor_list",
    "output_tensor",
    "output_tensors",
    "output_tensor_list",
)
"""The output's keyword in those methods (callers pass it by name too)."""


def _filling(original: Any) -> Any:
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        named = [kwargs[n] for n in OUTPUT_NAMES if n in kwargs]
        _zero(args[0] if args else named[0] if named else None)
        return result

    return call


@contextmanager
def deepspeed_environment(world: int, rank: int) -> Iterator[None]:
    """Environment and patches for one trace (see the module doc)."""
    wanted = {
        "DS_ACCELERATOR": "cpu",
        "LOCAL_RANK": str(rank),
        "RANK": str(rank),
        "WORLD_SIZE": str(world),
    }
    saved = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    import importlib

    ds_comm: Any = importlib.import_module("deepspeed.comm.comm")
    ds_torch: Any = importlib.import_module("deepspeed.comm.torch")  # the package shadows it
    from deepspeed.accelerator.cpu_accelerator import CPU_Accelerator
    from deepspeed.accelerator.real_accelerator import get_accelerator, set_accelerator

    groups: Any = importlib.import_module("deepspeed.utils.groups")
    cached = {k: v for k, v in vars(groups).items() if _cache(k, v)}
    before = get_accelerator()
    set_accelerator(CPU_Accelerator())
    build_shm = ds_torch.build_shm_op
    ds_torch.build_shm_op = lambda: None
    backend = ds_torch.TorchBackend
    originals = {name: getattr(backend, name) for name in FILLED}
    for name, original in originals.items():
        setattr(backend, name, _filling(original))
    # DeepSpeed rebinds these process-wide (ZeRO-3's ``zero3_linear_wrap`` replaces
    # ``F.linear``; its RNG tracker wraps ``torch.manual_seed``) and never puts them back,
    # which changed what a later trace in the same process saved for backward
    import torch

    process_wide = [(torch.nn.functional, "linear"), (torch, "manual_seed")]
    bound = [(owner, name, getattr(owner, name)) for owner, name in process_wide]
    try:
        yield
    finally:
        for owner, name, value in bound:
            setattr(owner, name, value)
        for name, original in originals.items():
            setattr(backend, name, original)
        ds_torch.build_shm_op = build_shm
        ds_comm.cdb = None
        for name, value in cached.items():
            setattr(groups, name, dict(value) if isinstance(value, dict) else value)
        set_accelerator(before)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
