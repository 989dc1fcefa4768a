"""The PEFT ``LoraConfig`` and bitsandbytes ``BitsAndBytesConfig`` a LoRA / QLoRA plan
means, as a Python snippet placed beside the framework config.

The framework configs cannot say which weights are adapted or quantized; this snippet
does, with the module names taken from the plan's own inventory (the tensors the ledger
adapts, ``engine.ledger.states.lora.is_target``). Keys follow peft 0.21 ``LoraConfig``
and transformers 5 ``BitsAndBytesConfig``; ``autocast_adapter_dtype`` is
``get_peft_model``'s (adapters kept fp32 over a 16-bit base). The plan's name is the
only plan text in it, escaped to one line of the docstring (issue 33: a triple quote in a
name once closed it and the rest ran as Python); every value is a ``repr``.
"""

from __future__ import annotations

from engine.exports.common import TORCH_DTYPE, Snippet
from engine.fileio.oneline import docstring_text
from engine.ledger.states.lora import is_target
from engine.models.inventory import build_inventory
from engine.plan import Plan
from engine.stacks.defaults import resolved

FILENAME = "peft_config.py"


def target_modules(plan: Plan) -> list[str]:
    """The module names (last component) PEFT matches, in inventory order."""
    seen: dict[str, None] = {}
    for t in build_inventory(plan.model.architecture):
        if is_target(t, plan.method.lora):
            seen.setdefault(t.name.removesuffix(".weight").rsplit(".", 1)[-1], None)
    return list(seen)


def peft_snippet(plan: Plan) -> Snippet | None:
    """The snippet for a LoRA / QLoRA plan; None for full or custom training."""
    kind = plan.method.kind
    if kind not in ("lora", "qlora"):
        return None
    lora, q = plan.method.lora, plan.method.qlora
    lines = [
        f'"""PEFT {"QLoRA" if kind == "qlora" else "LoRA"} settings for '
        f'{docstring_text(plan.model.name)}, written by MemPlan."""',
        "",
        "from peft import LoraConfig",
    ]
    if kind == "qlora":
        lines += ["import torch", "from transformers import BitsAndBytesConfig"]
    lines += [
        "",
        "lora_config = LoraConfig(",
        f"    r={lora.rank},",
        f"    lora_alpha={lora.alpha!r},",
        f"    lora_dropout={lora.dropout!r},",
        f"    target_modules={target_modules(plan)!r},",
        '    bias="none",',
        '    task_type="CAUSAL_LM",',
        ")",
        f"AUTOCAST_ADAPTER_DTYPE = {lora.adapter_dtype == 'fp32'}  # get_peft_model(...)",
    ]
    if kind == "qlora":
        lines += [
            "",
            "bnb_config = BitsAndBytesConfig(",
            "    load_in_4bit=True,",
            '    bnb_4bit_quant_type="nf4",',
            f"    bnb_4bit_use_double_quant={q.double_quant},",
            f"    bnb_4bit_compute_dtype=torch.{TORCH_DTYPE[q.compute_dtype]},",
        ]
        storage = resolved(plan).method.qlora.quant_storage  # FSDP / ZeRO-3 shard it
        if storage in TORCH_DTYPE:
            lines.append(f"    bnb_4bit_quant_storage=torch.{TORCH_DTYPE[storage]},")
        lines.append(")")
        if q.block_size != 64:
            lines.append(f"# block size {q.block_size}: bitsandbytes' NF4 blocks are 64")
    return Snippet(FILENAME, "\n".join(lines) + "\n")
