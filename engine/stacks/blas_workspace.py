"""The cuBLAS / cuBLASLt workspaces PyTorch keeps, by torch version and accelerator.

Why these are allocated bytes, not memory outside PyTorch: since pytorch #83461 (torch
1.13) ATen gives each (cuBLAS handle, stream) pair a workspace it allocates through the
CUDA caching allocator and hands to cuBLAS with ``cublasSetWorkspace``
(``aten/src/ATen/cuda/CublasHandlePool.cpp``: ``getCurrentCUDABlasHandle`` →
``setWorkspaceForHandle`` / ``getNewWorkspace`` → ``CUDACachingAllocator::get()->
allocate(getChosenWorkspaceSize())``), kept in ``cublas_handle_stream_to_workspace()``
for the life of the process — so it is in ``torch.cuda.memory_allocated`` and in every
``max_memory_allocated`` / ``max_memory_reserved`` a published run reports. The one
exception: torch 2.2 and 2.3 built against CUDA 12.2 or later (#113994 wrapped the
allocation in ``CUDA_VERSION < 12200``; #124250 restored it in torch 2.4), where cuBLAS
allocates its own workspace with ``cudaMallocAsync``, outside PyTorch. The official
wheels of 2.2 and 2.3 are cu118 / cu121, so the explicit workspace is the default
there too; a ``+cu122`` (or later) build named in ``runtime.framework_version`` moves it
outside.

Size of one workspace (``parseChosenWorkspaceSize``, ``CUBLAS_WORKSPACE_CONFIG`` unset):
``:4096:2:16:8`` = 4096 KiB × 2 + 16 KiB × 8 = 8,519,680 B (#89027, torch 2.0), and
4096 KiB × 8 = 32 MiB where ``properties->major == 9`` (Hopper); Blackwell (major 10
and 12) joined the 32 MiB arm with #175344 (February 2026, so torch 2.11 may or may not
have it; 2.12 does). ROCm: 32 MiB, 128 MiB on gfx94x / gfx95x (MI300, MI350), set
through the allocator since #138791 (torch 2.6), plus hipBLASLt's own 76 MiB workspace
(``parseCUDABlasLtWorkspaceSize``), never unified with it.

cuBLASLt (``addmm`` with a bias, ``_scaled_mm``): ``CUBLASLT_WORKSPACE_SIZE`` defaults
to 1024 KiB (#73439, #101145), allocated per call before #156495 (2025) and per
(handle, stream) after it, separate from the cuBLAS workspace until #168175 / #175879
(2026) made the Lt path reuse it by default (``unified_cublas_and_lt_workspaces``:
``getCUDABlasLtWorkspace`` returns the cuBLAS workspace of the same key, sized
``max(Lt size, getChosenWorkspaceSize())``). So before torch 2.12 the high end counts
one more MiB per handle (whether a biased 16-bit linear runs the Lt path is the model's).

How many: one per (handle, stream) that runs a GEMM. Handles are per host thread
(``aten/src/ATen/cuda/detail/DeviceThreadHandles.h``: ``PoolWindow::reserve`` gives each
thread its own), and the autograd engine runs a CUDA backward on its device thread
(``torch/csrc/autograd/engine.cpp``: ``Engine::execute`` queues the graph task to
``ready_queue(..., device)``, served by the thread ``start_device_threads`` made), on
the stream the forward ran on: a training step holds two workspaces on the compute
stream, the forward's (the Python thread) and backward's (recomputed forwards under
activation checkpointing run there too). FSDP's and DDP's side streams run
collectives and copies, no GEMM, so they hold none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from engine.stacks.accelerators import Generation, generation_of
from engine.units import KiB, MiB

CUBLAS_DEFAULT = 4096 * KiB * 2 + 16 * KiB * 8
"""``:4096:2:16:8`` — the workspace of one (handle, stream) on pre-Hopper cards."""
CUBLAS_32MIB = 4096 * KiB * 8
"""Hopper's (and, from #175344, Blackwell's) workspace of one (handle, stream)."""
CUBLASLT_DEFAULT = 1024 * KiB
"""``CUBLASLT_WORKSPACE_SIZE``'s default (KiB), a separate workspace before unification."""
HIPBLAS_DEFAULT, HIPBLAS_GFX94 = 32 * MiB, 128 * MiB
HIPBLASLT_DEFAULT = 76 * MiB
TRAINING_HANDLES = 2
"""The forward's handle (the Python thread) and backward's (autograd's device thread)."""

_VERSION = re.compile(r"torch\s*v?(\d+)\.(\d+)(?:\.\d+)?(?:\S*?\+cu(\d+))?", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class TorchBuild:
    """A torch version (major, minor) and the CUDA it was built against (None: unknown)."""

    version: tuple[int, int]
    cuda: int | None  # e.g. 121 for "+cu121"


LATEST = TorchBuild((2, 13), None)
"""What an unreadable ``runtime.framework_version`` is taken for (the field's default)."""


def torch_build(text: str) -> TorchBuild:
    """The torch build ``runtime.framework_version`` names ("torch 2.2.1+cu121"), or
    :data:`LATEST` where it names none."""
    m = _VERSION.search(text)
    if m is None:
        return LATEST
    cuda = int(m.group(3)) if m.group(3) else None
    return TorchBuild((int(m.group(1)), int(m.group(2))), cuda)


@dataclass(frozen=True, slots=True)
class WorkspaceBand:
    """One (handle, stream)'s workspace bytes (low, high), whether the caching allocator
    holds it, and why."""

    low: int
    high: int
    inside: bool
    why: str


@cache
def workspace_band(framework_version: str, accelerator: str) -> WorkspaceBand:
    """The cuBLAS(Lt) workspace of one (handle, stream) under this torch build on this
    card (see the module docstring for each number's source)."""
    build = torch_build(framework_version)
    gen = generation_of(accelerator)
    v = build.version
    inside = not ((2, 2) <= v < (2, 4) and build.cuda is not None and build.cuda >= 122)
    where = "" if inside else "; torch 2.2-2.3 on CUDA >= 12.2: cuBLAS's own, outside PyTorch"
    if gen == "amd":
        return WorkspaceBand(
            HIPBLAS_DEFAULT,
            HIPBLAS_GFX94 + HIPBLASLT_DEFAULT,
            v >= (2, 6),
            "ROCm: hipBLAS 32 MiB (128 MiB on gfx94x/95x) + hipBLASLt's own 76 MiB",
        )
    low, high, why = _cublas(gen, v)
    if v < (2, 12):  # a separate 1 MiB cuBLASLt workspace where a GEMM takes the Lt path
        high += CUBLASLT_DEFAULT
        why += " + 0-1 MiB cuBLASLt (separate before torch 2.12)"
    return WorkspaceBand(low, high, inside, why + where)


def _cublas(gen: Generation, v: tuple[int, int]) -> tuple[int, int, str]:
    if gen in ("ampere", "ada"):
        return CUBLAS_DEFAULT, CUBLAS_DEFAULT, ":4096:2:16:8 = 8,519,680 B (pre-Hopper)"
    if gen == "hopper":
        return CUBLAS_32MIB, CUBLAS_32MIB, "32 MiB (Hopper, major 9)"
    if gen == "blackwell":
        if v >= (2, 12):
            return CUBLAS_32MIB, CUBLAS_32MIB, "32 MiB (Blackwell, #175344)"
        if v == (2, 11):
            return CUBLAS_DEFAULT, CUBLAS_32MIB, "8,519,680 B or 32 MiB (Blackwell, 2.11)"
        return CUBLAS_DEFAULT, CUBLAS_DEFAULT, ":4096:2:16:8 (Blackwell before #175344)"
    return CUBLAS_DEFAULT, CUBLAS_32MIB, "8,519,680 B to 32 MiB (card not known)"
