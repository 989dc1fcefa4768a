"""The trace's torchtitan patches allocate as CUDA does where CPU would not.

- fp32 autocast: torchtitan's MoE router runs its gate under
  ``torch.autocast(device_type=x.device.type, dtype=torch.float32)``
  (``models/common/moe.py`` ``TokenChoiceTopKRouter.forward``). CUDA casts the linear's
  bf16 input and weight to fp32 (the mm keeps both for its backward: T·h·4 + E·h·4 B);
  CPU autocast supports only 16-bit dtypes and disables itself, which left the traced
  gate in bf16 (the Qwen3-30B-A3B layer 4,895 B a token below the ledger).
- RMSNorm on a sequence-sharded DTensor (TP + SP) runs the fused allocation too
  (``test_titan_grid.py``'s TP case: inside since).
"""

from __future__ import annotations

import pytest

from tests.trace.needs_extra import needs_trace_extra

pytest.importorskip("torchtitan")
pytestmark = needs_trace_extra


def test_a_cpu_fp32_autocast_runs_the_linear_in_fp32_as_cuda_does() -> None:
    import torch
    import torch.nn.functional as F

    from engine.trace.titan.patches import titan_patches

    x = torch.ones(4, 8, dtype=torch.bfloat16, requires_grad=True)
    w = torch.ones(3, 8, dtype=torch.bfloat16, requires_grad=True)
    with torch.autocast(device_type="cpu", dtype=torch.float32):
        assert F.linear(x, w).dtype == torch.bfloat16  # torch's CPU autocast: disabled
    saved: list[torch.Tensor] = []

    def keep(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    with titan_patches():
        hooks = torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t)
        with hooks, torch.autocast(device_type="cpu", dtype=torch.float32):
            out = F.linear(x, w)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            kept = F.linear(x.float(), w.float())  # any other autocast is torch's
    assert out.dtype == torch.float32 and kept.dtype == torch.bfloat16
    # the mm keeps the fp32 copies of its weight (3 × 8, transposed) and input (4 × 8)
    assert sorted((t.numel(), t.dtype) for t in saved) == [(24, torch.float32), (32, torch.float32)]
