"""The cuBLAS(Lt) workspaces, by hand from PyTorch's ``aten/src/ATen/cuda/CublasHandlePool.cpp``.

``parseChosenWorkspaceSize`` with ``CUBLAS_WORKSPACE_CONFIG`` unset: ``:4096:2:16:8`` =
4096 KiB × 2 + 16 KiB × 8 = 8,388,608 + 131,072 = 8,519,680 B, and 4096 KiB × 8 =
33,554,432 B where ``properties->major == 9`` (Hopper; Blackwell from #175344).
``setWorkspaceForHandle`` allocates it through ``CUDACachingAllocator::get()->allocate``
once per (handle, stream) and keeps it in ``cublas_handle_stream_to_workspace()``;
handles are per host thread (``DeviceThreadHandles.h`` ``PoolWindow::reserve``) and
autograd runs a CUDA backward on its device thread, so a training step holds two: the
forward's and backward's. ``CUBLASLT_WORKSPACE_SIZE`` defaults to 1024 KiB, a workspace
of its own before torch 2.12 (``unified_cublas_and_lt_workspaces`` after).
"""

from __future__ import annotations

from engine.estimate import estimate
from engine.plan import default_plan, with_value, with_values
from engine.sections.base import CANONICAL_CONTEXT
from engine.stacks.blas_workspace import TorchBuild, torch_build, workspace_band
from engine.units import MiB

PRE_HOPPER = 4096 * 1024 * 2 + 16 * 1024 * 8
HOPPER = 4096 * 1024 * 8


def _band(version: str, card: str) -> tuple[int, int]:
    band = workspace_band(version, card)
    return band.low, band.high


def _cublas(plan_changes: dict[str, object]) -> tuple[str, int, int]:
    plan = with_values(default_plan(), plan_changes)
    row = next(r for r in estimate(plan).heaviest.rows if r.id == "hbm.runtime.cublas")
    return row.state, row.low, row.high


def test_sizes_follow_the_torch_source() -> None:
    assert PRE_HOPPER == 8_519_680 and HOPPER == 33_554_432
    ada = workspace_band("torch 2.13", "rtx-4090-24gb")
    assert (ada.low, ada.high, ada.inside) == (PRE_HOPPER, PRE_HOPPER, True)
    h100 = workspace_band("torch 2.13", "h100-sxm-80gb")
    assert (h100.low, h100.high) == (HOPPER, HOPPER)
    # before torch 2.12 a biased 16-bit linear's cuBLASLt workspace is a separate 1 MiB
    old = workspace_band("torch 2.4.1", "a100-sxm-80gb")
    assert (old.low, old.high) == (PRE_HOPPER, PRE_HOPPER + MiB)
    # Blackwell: 8,519,680 B before #175344, either in 2.11, 32 MiB from 2.12
    assert _band("torch 2.10", "b200-180gb") == (PRE_HOPPER, PRE_HOPPER + MiB)
    assert _band("torch 2.11", "b200-180gb") == (PRE_HOPPER, HOPPER + MiB)
    assert _band("torch 2.12", "b200-180gb") == (HOPPER, HOPPER)


def test_torch_2_2_on_cuda_12_2_leaves_it_to_cublas() -> None:
    """#113994 wrapped the explicit workspace in ``CUDA_VERSION < 12200`` (torch 2.2,
    2.3); #124250 restored it in 2.4. The cu121 wheels keep it in the allocator."""
    assert torch_build("torch 2.2.1+cu121") == TorchBuild((2, 2), 121)
    assert torch_build("2.13") == TorchBuild((2, 13), None)  # no "torch": the default
    assert workspace_band("torch 2.2.1+cu121", "rtx-4090-24gb").inside
    assert workspace_band("torch 2.2.1", "rtx-4090-24gb").inside  # official wheels: cu121
    assert not workspace_band("torch 2.3.0+cu124", "rtx-4090-24gb").inside
    assert workspace_band("torch 2.4.0+cu124", "rtx-4090-24gb").inside


def test_two_workspaces_are_allocated_bytes() -> None:
    """RTX 4090 under torch 2.2.1+cu121: 2 × 8,519,680 = 17,039,360 B, + 2 × 1 MiB of
    cuBLASLt at the high end; in the allocated steady bytes (every moment), not outside.
    The same plan on a cu124 build of 2.3: cuBLAS's own memory, outside PyTorch."""
    card = {"hardware.accelerator": "rtx-4090-24gb"}
    state, low, high = _cublas({**card, "runtime.framework_version": "torch 2.2.1+cu121"})
    assert (state, low, high) == ("workspace", 17_039_360, 17_039_360 + 2 * MiB)
    state, low, _ = _cublas({**card, "runtime.framework_version": "torch 2.3.0+cu124"})
    assert (state, low) == ("runtime", 17_039_360)
    plan = default_plan()  # H100, torch 2.13: 2 × 32 MiB in every allocated moment
    without = estimate(with_value(plan, "runtime.cublas_workspace_bytes", {"low": 0, "high": 0}))
    with_ws = estimate(plan)
    assert with_ws.peak.low - without.peak.low == 2 * HOPPER
    assert with_ws.heaviest.totals.steady[0] - without.heaviest.totals.steady[0] == 2 * HOPPER


def test_a_set_band_is_per_workspace() -> None:
    state, low, high = _cublas({"runtime.cublas_workspace_bytes": {"low": MiB, "high": 4 * MiB}})
    assert (state, low, high) == ("workspace", 2 * MiB, 8 * MiB)


def test_the_old_default_band_reads_as_auto_and_keeps_the_hash() -> None:
    """Plans saved with the old default (8–32 MiB, one handle outside PyTorch) follow the
    torch rule, and the canonical form writes auto as that band: their hashes hold."""
    old = with_value(
        default_plan(), "runtime.cublas_workspace_bytes", {"low": 8 * MiB, "high": 32 * MiB}
    )
    assert old.runtime.cublas_workspace_bytes is None
    assert old.config_hash() == default_plan().config_hash()
    canonical = default_plan().runtime.model_dump(mode="json", context=CANONICAL_CONTEXT)
    assert canonical["cublas_workspace_bytes"] == {"low": 8 * MiB, "high": 32 * MiB}
    assert default_plan().runtime.model_dump(mode="json")["cublas_workspace_bytes"] is None
