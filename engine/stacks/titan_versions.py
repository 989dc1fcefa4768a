"""torchtitan releases whose model code changes what a step holds, so that a stack default
can follow the ``runtime.torchtitan_version`` a plan names."""

from __future__ import annotations

from engine.sections.runtime import RuntimeSection

TITAN_FUSED_SINCE = (0, 3, 0)
"""The first torchtitan release whose llama3 / qwen3 models fuse q / k / v into one
``wqkv`` and give every attention layer its own RoPE cache buffer; 0.2.0's
``models/llama3/model/model.py`` still has separate ``wq`` / ``wk`` / ``wv`` and one
``freqs_cis`` buffer registered on the model (as 0.1.0 and the 2024 commits had)."""


def titan_at_least(version: str, since: tuple[int, int, int]) -> bool:
    """Whether torchtitan ``version`` (``"0.2"`` or ``"0.2.0"``) is ``since`` or later."""
    parts = tuple(int(p) for p in version.split("."))
    return parts + (0,) * (3 - len(parts)) >= since


def qkv_fusion(stack: str, kind: str, rt: RuntimeSection) -> tuple[str, str, str]:
    """torchtitan 0.3 fuses q / k / v into one ``wqkv``; a plan training only some
    projections (``custom`` roles q, v …) names the model's own, so keeps them; older
    torchtitan releases kept them apart."""
    if (
        stack == "torchtitan"
        and kind == "full"
        and titan_at_least(rt.torchtitan_version, TITAN_FUSED_SINCE)
    ):
        return (
            "fused",
            "every 0.3 llama3 / qwen3 flavor builds one wqkv per layer (fuse_qkv=True)",
            "torchtitan-fused-qkv",
        )
    return "as_model", "the model's own q / k / v projections", "hf-transformers-llama"


def rope_cache(stack: str, rt: RuntimeSection) -> tuple[str, str, str]:
    """torchtitan 0.3 gives every attention layer its own RoPE cache; earlier releases one
    ``freqs_cis`` on the model."""
    if stack == "torchtitan" and titan_at_least(rt.torchtitan_version, TITAN_FUSED_SINCE):
        return (
            "per_layer",
            "0.3 builds a RoPE module with its own cache buffer in every attention layer",
            "torchtitan-rope-cache",
        )
    if stack == "torchtitan":
        return (
            "per_model",
            "before 0.3 the model registers one freqs_cis buffer of 2 x seq_len positions",
            "torchtitan-rope-cache",
        )
    return "per_model", "read only under torchtitan's profile", "stack-pytorch"
