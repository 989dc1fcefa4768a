"""The appendix holds the plan's own stack's config and nothing else, with its companion
files listed after it (gui/report/content.py appendix_formats)."""

from __future__ import annotations

from typing import Any

from engine.plan import default_plan, with_values
from engine.planfile import PlanFile
from gui.report.content import appendix_formats, gather
from gui.report.sections.appendix import appendix_section


def test_each_stack_gets_its_own_config() -> None:
    base = default_plan()
    assert appendix_formats(base) == ()  # stack pytorch (auto from FSDP2, full)
    zero3 = with_values(base, {"parallelism.strategy": "zero3"})
    assert appendix_formats(zero3) == ("deepspeed",)
    titan = with_values(base, {"stack.name": "torchtitan"})
    assert appendix_formats(titan) == ("torchtitan",)
    hf = with_values(base, {"method.kind": "qlora"})  # auto → hf_trainer, FSDP2
    assert appendix_formats(hf) == ("accelerate",)
    hf_zero = with_values(base, {"method.kind": "lora", "parallelism.strategy": "zero2"})
    assert appendix_formats(hf_zero) == ("deepspeed",)


def test_an_hf_qlora_plan_prints_accelerate_and_its_peft_settings(qapp: Any) -> None:
    """An HF-Trainer FSDP2 QLoRA plan: accelerate's config, its PEFT snippet listed after
    it, no ZeRO-3 ds_config, and nothing "beside this file" on paper."""
    plan = with_values(default_plan(), {"method.kind": "qlora"})
    html = appendix_section(gather(PlanFile(plan=plan, name="q"), "gb"))
    assert "accelerate_config.yaml" in html and "ds_config.json" not in html
    assert "beside this file" not in html and "(listed below)" in html
    assert "memplan_recipe.py" not in html


def test_a_plain_pytorch_plan_says_it_reads_no_config(qapp: Any) -> None:
    html = appendix_section(gather(PlanFile(plan=default_plan(), name="d"), "gb"))
    assert "reads no framework config file" in html and "ds_config.json" not in html
