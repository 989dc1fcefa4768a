"""What LitGPT's fused qkv adapter keeps for backward beyond PEFT's per-projection ones.

LitGPT's ``LoRAQKVLinear.forward`` (litgpt/lora.py, 2024) runs one adapter on the fused
qkv linear's input, whatever of q, k and v it enables (``method.lora.implementation =
litgpt``, the targets its ``enable_lora`` flags):

- ``F.linear(self.lora_dropout(x), self.lora_A)`` — one dropout (its mask) and one kept
  dropout output, where PEFT runs a dropout per targeted projection; A's output has r
  features per enabled part (``lora_A`` is ``r · sum(enable_lora)`` rows), which the
  grouped ``conv1d`` for B keeps;
- ``zero_pad`` scatters B's output (tokens × the enabled parts' widths) into a zero
  (tokens × q + 2 kv) tensor with an out-of-place ``index_copy`` whenever not all three
  parts are enabled. Autograd keeps ``index_copy``'s source for its gradient (torch
  tools/autograd/derivatives.yaml, ``index_copy``: ``grad.index_select(dim, index)
  .expand_as(source)`` reads ``source``), with the int64 index tensor the forward builds
  (``torch.tensor(self.lora_ind)``, one element per enabled output feature).

Traced with LitGPT's own model (litgpt 2024-04 ``lora.GPT``, Llama-2-7B and Llama-3-8B
shapes) on fake tensors: the saved set of one block holds exactly these.
"""

from __future__ import annotations

from engine.ledger.activations.geometry import INT64, Geometry, Term, Trainability


def part_widths(g: Geometry, parts: frozenset[str]) -> int:
    """Output features of the enabled parts of the fused qkv (local heads)."""
    widths = {
        "q": g.heads_local * g.head_dim,
        "k": g.kv_local * g.head_dim,
        "v": g.kv_local * g.v_dim,
    }
    return sum(widths[p] for p in parts)


def a_out_width(tr: Trainability, role: str) -> int:
    """Features of an adapter's A output: r, or r per enabled part of LitGPT's fused
    qkv adapter."""
    if role == "qkv" and tr.fused_parts:
        return tr.rank * len(tr.fused_parts)
    return tr.rank


def zero_pad_terms(g: Geometry, tr: Trainability, role: str, a_bytes: int) -> list[Term]:
    """``zero_pad``'s ``index_copy`` source and index, when some part is not enabled."""
    if role != "qkv" or not tr.fused_parts or len(tr.fused_parts) == 3:
        return []
    width = part_widths(g, tr.fused_parts)
    return [
        Term("lora qkv zero_pad index_copy source (LitGPT)", width, a_bytes),
        Term("lora qkv zero_pad index int64 (LitGPT)", width, INT64, "const"),
    ]
