"""Compiled ``compute_cross_entropy`` keeps its 16-bit input, which is never donated.

torchtune's ``compile_loss`` compiles ``CEWithChunkedOutputLoss.compute_cross_entropy``
(``F.cross_entropy(logits.float(), labels, reduction="sum")``,
torchtune/modules/loss/ce_chunked_output_loss.py) alone. The ledger's
``hbm.loss.output_chunks`` row keeps each chunk's 16-bit logits plus two fp32 row
statistics, and ``hbm.loss.output_chunks_backward`` adds one chunk's gradient at both
ends: AOT Autograd donates to the backward graph only saved tensors that share no
storage with a forward input (torch/_functorch/_aot_autograd/graph_compile.py
``collect_fw_donated_buffer_idxs``), and the saved chunk is the input, so Inductor cannot
write the gradient into it. Compiled here with Inductor on CPU (needs a C++ compiler).
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="Inductor needs g++")


def test_the_saved_logits_are_the_input_and_only_the_statistics_are_donated() -> None:
    import torch.nn.functional as F
    from torch._functorch._aot_autograd import graph_compile

    donated: list[list[int]] = []
    collect = graph_compile.collect_bw_donated_buffer_idxs

    def spy(*args: Any, **kwargs: Any) -> list[int]:
        out: list[int] = collect(*args, **kwargs)
        donated.append(out)
        return out

    def compute_cross_entropy(logits: Any, labels: Any) -> Any:
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")

    graph_compile.collect_bw_donated_buffer_idxs = spy
    try:
        torch._dynamo.reset()
        loss_fn = torch.compile(compute_cross_entropy, backend="inductor")
        head = torch.nn.Linear(32, 1000, bias=False).to(torch.bfloat16).requires_grad_(False)
        h = torch.randn(64, 32, dtype=torch.bfloat16, requires_grad=True)
        logits = head(h)  # a chunk's logits, as TransformerDecoder.chunked_output makes it
        out = loss_fn(logits, torch.randint(0, 1000, (64,)))
    finally:
        graph_compile.collect_bw_donated_buffer_idxs = collect
        torch._dynamo.reset()
    saved = out.grad_fn.saved_tensors
    assert [(tuple(t.shape), t.dtype) for t in saved] == [
        ((64, 1000), torch.bfloat16),
        ((64,), torch.int64),
        ((64, 1), torch.float32),
        ((64, 1), torch.float32),
    ]
    assert saved[0].untyped_storage().data_ptr() == logits.untyped_storage().data_ptr()
    assert donated == [[2, 3]]  # the max and log-sum-exp; never index 0, the logits
