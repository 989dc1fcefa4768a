"""The title page leads with the recommendation — what to buy, the margin, the one
measurement that decides — before the plan's own verdict, and the validation plan
measures the layout the recommendation names (gui/report/sections/recommendation.py)."""

from __future__ import annotations

import html
import re
from typing import Any

from engine.plan import default_plan, with_values
from engine.planfile import PlanFile
from engine.presets import plan_for_model_preset
from gui.report.content import gather
from gui.report.sections.measuring import device_threshold, validation_plan
from gui.report.sections.title import title_page


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", markup)).replace("  ", " ")


def test_the_default_plan_leads_with_what_to_buy(qapp: Any) -> None:
    """Default plan (DP 8 fits): buy 8 × H100 (one node), run the plan's own DP 8 — the
    window's chosen layout — and say the fewest that fit are 4 (DP 4, a partial node).
    The recommendation comes before the verdict heading."""
    page = title_page(gather(PlanFile(plan=default_plan(), name="t"), "gb"))
    text = " ".join(_text(page).split())
    buy = text.index("Buy 8 × NVIDIA H100")
    assert buy < text.index("The plan as written — verdict: FITS")
    assert "(1 node × 8 (rounded to whole nodes)) and run TP1 PP1 CP1 EP1 DP8" in text
    assert "The fewest GPUs that fit are 4 (TP1 PP1 CP1 EP1 DP4" in text
    assert "Margin:" in text and "Measure first:" in text
    assert "A thin margin" not in text  # 8.22 GB of 76.44 GB: 10.8 %


def test_a_plan_that_does_not_fit_recommends_the_counts_layout(qapp: Any) -> None:
    """Llama-3.1-70B's preset plan (TP 1 DP 8) does not fit: the page says to buy the
    procurement count's layout and measure the low end of its range when it straddles (else
    that layout) — and the
    validation plan measures that layout, not the failing plan (whose device figure would
    have read "≤ 155.56 GB and ≤ capacity 84.93 GB" at once)."""
    c = gather(PlanFile(plan=plan_for_model_preset("llama-3.1-70b"), name="70b"), "gb")
    k = c.counts
    text = " ".join(_text(title_page(c)).split())
    assert c.est.verdict == "does_not_fit" and k.first_layout.layout is not None
    assert f"Buy {k.first_layout.gpus:,} × NVIDIA H100" in text
    assert f"run {k.first_layout.layout.label()}" in text
    assert "The plan as written does not fit" in text
    assert text.index("Buy ") < text.index("verdict: DOES NOT FIT")
    vp = " ".join(_text(validation_plan(c)).split())
    # the low end of a straddling range, else the recommended layout itself
    low = k.validation_low if k.straddles else k.first_layout
    assert low.layout is not None
    assert f"Measure {low.layout.label()} on {low.gpus:,} GPUs" in vp
    assert "Measure first: the per-rank peak (max_memory_allocated plus the" in text
    assert f"of {low.layout.label()} on {low.gpus:,} GPUs" in text


def test_a_thin_margin_is_called_thin(qapp: Any) -> None:
    """Llama-3.1-405B's preset: the procurement layout has 0.77 GB of 76.44 GB under the
    limit (1.0 %), under THIN_MARGIN (3 %): the page says it is close to the thinnest
    margin the search accepts."""
    c = gather(PlanFile(plan=plan_for_model_preset("llama-3.1-405b"), name="405b"), "gb")
    text = " ".join(_text(title_page(c)).split())
    assert "A thin margin: the search accepts any layout whose high estimate" in text


def test_a_one_gpu_qlora_plan_buys_a_single_gpu(qapp: Any) -> None:
    plan = with_values(default_plan(), {"method.kind": "qlora", "parallelism.dp": 1})
    text = " ".join(_text(title_page(gather(PlanFile(plan=plan, name="q"), "gb"))).split())
    assert "Buy 1 × NVIDIA H100 SXM 80 GB (a single GPU" in text
    assert "idle" not in text.split("The plan as written")[0]


def test_the_device_threshold_is_one_answer() -> None:
    """A straddling layout's high estimate (94.43 GB) is above capacity (84.93 GB): the
    threshold is capacity, and it says the measurement decides — not "≤ 94.43 GB and ≤
    capacity 84.93 GB" at once."""
    words = device_threshold(94_430_000_000, 84_930_000_000, "gb")
    assert words.startswith("≤ capacity 84.93 GB") and "this measurement decides" in words
    assert device_threshold(70_000_000_000, 84_930_000_000, "gb") == (
        "≤ 70.00 GB (capacity 84.93 GB)"
    )
