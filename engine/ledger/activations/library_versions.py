"""Library versions that change what a layer keeps for backward.

bitsandbytes ``MatMul4Bit.forward`` (bitsandbytes/autograd/_functions.py, source
``bnb-matmul4bit-input``): up to 0.43.1 it stored ``ctx.tensors = (A, B)`` whenever the
input or the weight needed a gradient — the 16-bit input ``A`` of every 4-bit linear
stayed alive until backward, although the backward of a frozen 4-bit weight reads only
``B`` (``grad_A = grad_output @ dequantize_4bit(B)``); 0.43.2 stores ``(None, B)``. With
an old bitsandbytes each quantized projection of a QLoRA plan keeps its input like a
trained linear does: one tensor per distinct input (q, k and v read the same normed
tensor; SDPA already keeps the attention output, so ``o`` adds only a contiguous copy
where the family makes one). :func:`kept_input_roles` names those projections, and the
hf-transformers profile counts their inputs as it counts a trained linear's
(:func:`engine.ledger.activations.hf_norms.input_kept`).
"""

from __future__ import annotations

from engine.sections.method import MethodSection

BNB_INPUT_FREED = (0, 43, 2)
"""The first bitsandbytes release whose 4-bit matmul no longer keeps its input."""

QUANTIZED_DENSE_ROLES = frozenset({"q", "k", "v", "qkv", "o", "gate", "up", "gate_up", "down"})
"""Projections bitsandbytes replaces with 4-bit linears in a dense decoder layer
(engine/ledger/states/quantized.py ``is_quantized``: the LoRA-target projections)."""


def version_tuple(text: str) -> tuple[int, ...]:
    """``"0.43.1"`` → ``(0, 43, 1)``; a missing patch is 0 (``"0.42"`` → ``(0, 42, 0)``)."""
    parts = tuple(int(p) for p in text.split("."))
    return parts + (0,) * (3 - len(parts))


def bnb_keeps_input(version: str) -> bool:
    """Whether this bitsandbytes' 4-bit matmul keeps its 16-bit input for backward."""
    return version_tuple(version) < BNB_INPUT_FREED


def kept_input_roles(method: MethodSection, bnb_version: str) -> frozenset[str]:
    """Frozen projections that keep their input anyway (empty but for QLoRA under an old
    bitsandbytes; torchao's ``LinearNF4`` saves only the NF4 weight)."""
    torchao = method.qlora.nf4_impl == "torchao"
    if method.kind != "qlora" or torchao or not bnb_keeps_input(bnb_version):
        return frozenset()
    return QUANTIZED_DENSE_ROLES
