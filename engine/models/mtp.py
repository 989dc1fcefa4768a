"""DeepSeek-V3's multi-token-prediction (MTP) module, and what its checkpoint stores extra.

transformers' ``DeepseekV3ForCausalLM`` does not build the MTP module: its loader drops
``model.layers.61.*`` as unexpected keys, so a transformers training run trains the
671,026,419,200-parameter main model only. Training *with* MTP (DeepSeek's own code,
Megatron-Core's ``MultiTokenPredictionBlock``) is an explicit input, ``mtp_layers``. Each
module's embedding and output head are the main model's, shared: DeepSeek's
``README_WEIGHTS.md`` describes the MTP weights as unique parameters "excluding the shared
Embedding and output Head", although the checkpoint stores copies of both under the MTP
layer's prefix. Those copies are storage, not parameters, and are never counted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator

from engine.models.spec import ArchitectureSpec
from engine.models.tensor import Tensor, linear, norm

_SHARED_COPIES = ("embed_tokens.weight", "shared_head.head.weight")
_LAYER = re.compile(r"^(?:model\.)?layers\.(\d+)\.")


def mtp_modules(
    spec: ArchitectureSpec,
    block: Callable[[ArchitectureSpec, str, int, int | None], Iterator[Tensor]],
) -> Iterator[Tensor]:
    """The ``mtp_layers`` MTP modules, as stored at ``model.layers.{L + k}``.

    Per module: norms of the embedding and of the previous hidden state (``enorm``,
    ``hnorm``), a ``2h → h`` projection (``eh_proj``), one full decoder block (``block``,
    MoE), and the head's norm (``shared_head.norm``). Tagged ``module="mtp"`` with
    ``layer=None`` so that placement keeps them with the output head on the last
    pipeline stage.
    """
    h = spec.hidden
    for k in range(spec.mtp_layers):
        index = spec.layers + k
        p = f"model.layers.{index}"
        out: list[Tensor] = []
        out += norm(f"{p}.enorm", h, False, None, "mtp")
        out += norm(f"{p}.hnorm", h, False, None, "mtp")
        out += linear(f"{p}.eh_proj", h, 2 * h, "mtp", False, None)
        out += block(spec, p, index, None)
        out += norm(f"{p}.shared_head.norm", h, False, None, "mtp")
        for t in out:
            yield Tensor(
                t.name, t.shape, t.role, t.kind, None, t.dtype, t.stored_transposed, "mtp", t.expert
            )


def unbuilt_stored_names(spec: ArchitectureSpec, stored: Iterable[str]) -> tuple[str, ...]:
    """Stored tensor names that are not parameters of ``spec`` by design.

    The shared embedding/head copies of every trained MTP module, and every tensor of the
    MTP layers beyond ``mtp_layers`` (all of them by default), which transformers ignores
    on load. Empty for families without MTP.
    """
    if spec.family != "deepseek_v3":
        return ()
    out: list[str] = []
    for name in stored:
        m = _LAYER.match(name)
        if m is None or int(m.group(1)) < spec.layers:
            continue
        trained = int(m.group(1)) < spec.layers + spec.mtp_layers
        if not trained or name.endswith(_SHARED_COPIES):
            out.append(name)
    return tuple(out)
