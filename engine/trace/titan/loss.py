"""torchtitan's losses in a traced step, and the two tracker fixes the chunked one needs.

The plan's resolved ``runtime.loss_impl`` picks it: ``eager`` is torchtitan's
``CrossEntropyLoss`` (``components/loss.py`` ``cross_entropy_loss``: the full
``[B, L, V]`` logits upcast to fp32, sum-reduced, then divided by the global
valid-token count). ``chunked`` is its ``ChunkedLossWrapper``: the model stops before
``lm_head`` (``_skip_lm_head``), the hidden states are split into
``num_chunks`` equal pieces along the sequence, and ``lm_head`` + loss + backward run
per chunk *inside the forward*, their gradients gathered into one fp32 buffer that the
decoder's backward then consumes; ``num_chunks`` is its config's default,
:data:`~engine.ledger.activations.loss_modes.TORCHTITAN_CHUNKS` (8), as the ledger
counts it. Compiled losses (``compile.components = ["loss"]``) are not traceable on fake
tensors under a dispatch-mode tracker and are refused (``support.py``).

Two things the chunked loss does break in ``FSDPMemTracker``
(shared/reference/tracing.md):

- ``lm_head`` is called once per chunk from the top level, which the tracker's
  per-module statistics refuse ("multiple iterative calls"): each chunk's ``lm_head``
  forward gets a parent, :data:`LOSS_PARENT`, among the module tracker's active modules
  (a real parent module would not do: every per-chunk backward ends by resetting the
  active set to ``Global``, and the parent's own exit then finds itself missing);
- ``ModTracker`` hangs a gradient hook on each module's inputs; on the chunk leaves that
  hook forms a reference cycle through C++ that keeps every step's hidden states alive,
  so the second step over-counts. :func:`hide_head_inputs` hides ``lm_head``'s inputs
  from that hook (its pop runs after backward instead, as for an input-less module).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from engine.ledger.activations.loss_modes import TORCHTITAN_CHUNKS

LOSS_PARENT = "ChunkedLossWrapper"
"""The parent name each chunk's ``lm_head`` forward runs under."""


def build_loss(loss_impl: str, model: Any) -> Any:
    """torchtitan's loss object for the plan's ``runtime.loss_impl`` (``eager`` or
    ``chunked``: the others are refused before); for ``chunked`` the model skips its head."""
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss

    if loss_impl != "chunked":
        return CrossEntropyLoss.Config().build()
    loss = ChunkedLossWrapper.Config(num_chunks=TORCHTITAN_CHUNKS).build()
    loss.set_lm_head(model.lm_head)
    model._skip_lm_head = True
    return loss


def nest_head(tracker: Any, head: Any) -> None:
    """Each ``head`` forward runs with :data:`LOSS_PARENT` among the module tracker's
    parents, and without its inputs hooked for gradients (see above)."""
    mods = tracker._mod_tracker
    pre: Callable[[Any, Any], None] = mods._fw_pre_hook
    post: Callable[[Any, Any, Any], None] = mods._fw_post_hook

    def pre_hook(module: Any, inputs: Any) -> None:
        if module is head:
            mods.parents.add(LOSS_PARENT)
            inputs = tuple(t.detach() if torch.is_tensor(t) else t for t in inputs)
        pre(module, inputs)

    def post_hook(module: Any, inputs: Any, output: Any) -> None:
        post(module, inputs, output)
        if module is head:
            mods.parents.discard(LOSS_PARENT)

    mods._fw_pre_hook = pre_hook
    mods._fw_post_hook = post_hook
