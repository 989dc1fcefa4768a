"""Megatron-Core's ``--recompute-granularity selective --recompute-modules``.

Megatron-Core (megatron/core/transformer/transformer_config.py ``recompute_modules``,
default ``["core_attn"]``; transformer_layer.py and mlp.py; source
``megatron-recompute-modules``) recomputes in backward the modules listed, each by its
own checkpoint:

- ``core_attn``: the attention core (``_checkpointed_attention_forward``): the softmax
  and its dropout under unfused attention; nothing more under flash attention;
- ``layernorm``: ``input_layernorm`` and ``pre_mlp_layernorm`` run under
  ``CheckpointWithoutOutput``: their outputs (the QKV and MLP inputs) are discarded once
  the next op has run and recomputed before backward; their inputs stay;
- ``mlp``: the dense MLP is one checkpoint: it keeps only its input (fc1's output and the
  activation's are recomputed);
- ``moe_act``, ``moe``, ``shared_experts``, ``mla_up_proj``: MoE and MLA modules; the
  megatron profile counts dense Korthikanti layers, so they change no term here.

The profile's terms (:mod:`engine.ledger.activations.megatron`, by their names there)
lose what the listed modules recompute. The modules reach the cached term builders
inside the recompute key (:func:`terms_key`): ``"selective"`` for Megatron's default
(``core_attn`` alone, the policy's own meaning), ``"selective[layernorm+mlp]"`` for
another list — so plans with the default share every cache entry they shared before.
"""

from __future__ import annotations

from engine.ledger.activations.geometry import Term
from engine.sections.method import RecomputeSection

DEFAULT = frozenset({"core_attn"})

DROPPED: dict[str, frozenset[str]] = {
    "layernorm": frozenset({"QKV input", "MLP input"}),
    "mlp": frozenset({"GELU input", "GELU output", "fc1 output (gate, up)", "SwiGLU output"}),
}
"""The megatron profile's terms each module's recomputation drops (by their names in
:mod:`engine.ledger.activations.megatron`; the MLP's dropout mask belongs to the
bias-dropout-add after it, outside its checkpoint, and stays)."""


def terms_key(rec: RecomputeSection, megatron: bool) -> str:
    """The recompute key the cached term builders read (module doc)."""
    mods = frozenset(rec.modules)
    if not megatron or rec.policy != "selective" or mods == DEFAULT:
        return rec.policy
    return "selective[" + "+".join(sorted(mods)) + "]"


def modules_of(key: str) -> frozenset[str]:
    """The modules a recompute key names (Megatron's default for plain ``selective``)."""
    if key == "selective":
        return DEFAULT
    if key.startswith("selective[") and key.endswith("]"):
        return frozenset(key[len("selective[") : -1].split("+"))
    return frozenset()


def core_attn(key: str) -> bool:
    """Whether the attention core is recomputed under this key."""
    return "core_attn" in modules_of(key)


def drop_recomputed(terms: list[Term], key: str) -> list[Term]:
    """The megatron profile's terms less those the key's modules recompute."""
    mods = modules_of(key)
    gone: set[str] = set()
    for m in mods & DROPPED.keys():
        gone |= DROPPED[m]
    return [t for t in terms if t.name not in gone] if gone else terms
