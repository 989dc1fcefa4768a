"""Every export of a plan that does not fit says so (issue 38): first in its notes, and
as the file's first comment where the format takes comments (all but ds_config JSON)."""

from __future__ import annotations

import json

import pytest

from engine.estimate import estimate
from engine.exports.formats import FORMATS
from engine.plan import default_plan, with_values

# The default plan (Llama 3.1 8B, FSDP2 on 8 × H100) fits at 8,192 tokens; at 131,072
# tokens per sequence its activations alone are 16 × those of the default (linear in
# sequence length with flash attention) and the verdict is DOES NOT FIT.
TOO_LONG = {"batch.seq_len": 131_072}


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_plan_that_does_not_fit_says_so(fmt: str) -> None:
    plan = with_values(default_plan(), TOO_LONG)
    assert estimate(plan).verdict == "does_not_fit"
    exp = FORMATS[fmt].export(plan)
    assert exp.notes[len(exp.unexpressed)].startswith(
        "WARNING: MemPlan's estimate for this plan: DOES NOT FIT"
    )
    if fmt == "deepspeed":
        json.loads(exp.text)  # still JSON: no comment is possible, the notes carry it
        assert "DOES NOT FIT" not in exp.text
    else:
        head = exp.text.splitlines()[:2]
        assert any(line.startswith("# WARNING: MemPlan's estimate") for line in head)
        if exp.text.startswith("#!"):
            assert exp.text.splitlines()[1].startswith("# WARNING")


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_a_plan_that_fits_has_no_warning(fmt: str) -> None:
    plan = default_plan()
    assert estimate(plan).verdict == "fits"
    exp = FORMATS[fmt].export(plan)
    assert "WARNING: MemPlan" not in exp.text
    assert not any("WARNING: MemPlan" in n for n in exp.notes)
