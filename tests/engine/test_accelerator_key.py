"""``hardware.accelerator`` must be a catalogue key (or ``custom``): a typo used to pass as
free text while the plan kept the H100 figures it held (the ``rtx-4090`` golden case ran
on 80 GB). The error names the field and every known key, files with a bad key open with
that message, and ``--set hardware.accelerator=KEY`` applies the preset's figures."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from engine.cli import main
from engine.errors import PlanFileError
from engine.plan import Plan, default_plan, describe_validation_error, with_value
from engine.planfile import PlanFile, dumps, parse
from engine.presets import accelerator, accelerators
from engine.sections.hardware_catalogue import CUSTOM_ACCELERATOR, accelerator_keys


def test_every_catalogue_key_and_custom_are_accepted() -> None:
    assert accelerator_keys() == (*(a.key for a in accelerators()), CUSTOM_ACCELERATOR)
    for key in accelerator_keys():
        assert with_value(default_plan(), "hardware.accelerator", key).hardware.accelerator == key


def test_an_unknown_key_names_the_field_and_every_known_key() -> None:
    with pytest.raises(ValidationError) as exc:
        with_value(default_plan(), "hardware.accelerator", "rtx-4090")
    (message,) = describe_validation_error(exc.value, "plan")
    assert message.startswith("plan: hardware.accelerator 'rtx-4090' is not a known accelerator")
    assert all(key in message for key in accelerator_keys())  # the list is not clipped


def test_a_file_with_a_bad_key_opens_with_that_message() -> None:
    """An old file that held free text is refused with the message, not a traceback."""
    doc = json.loads(dumps(PlanFile(plan=default_plan())))
    doc["plan"]["hardware"]["accelerator"] = "H100 (ours)"
    with pytest.raises(PlanFileError) as exc:
        parse(json.dumps(doc))
    assert "hardware.accelerator 'H100 (ours)' is not a known accelerator key" in str(exc.value)
    assert "rtx-4090-24gb" in str(exc.value)


def test_set_accelerator_applies_the_preset_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """RTX 4090: 24 GiB physical; the preset's usable figure decides fit, not the H100's;
    a figure set in the same command wins over the preset's."""
    acc = accelerator("rtx-4090-24gb")
    assert main(["estimate", "--json", "--set", "hardware.accelerator=rtx-4090-24gb"]) == 0
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert (
        doc["fit"]["capacity_bytes"]
        == acc.usable_hbm_bytes
        != default_plan().hardware.capacity_bytes
    )
    assert "hardware.accelerator=rtx-4090-24gb also sets hbm_bytes" in out.err
    args = ["--set", "hardware.usable_hbm_bytes=1000000000"]
    assert main(["estimate", "--json", "--set", "hardware.accelerator=rtx-4090-24gb", *args]) == 0
    assert json.loads(capsys.readouterr().out)["fit"]["capacity_bytes"] == 1_000_000_000


def test_custom_keeps_the_plan_figures() -> None:
    plan: Plan = with_value(default_plan(), "hardware.accelerator", CUSTOM_ACCELERATOR)
    assert plan.hardware.capacity_bytes == default_plan().hardware.capacity_bytes
