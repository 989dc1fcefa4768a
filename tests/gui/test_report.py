"""The PDF report, read back with poppler: the figures are the engine's, to the byte.

Four PDFs are written once per module (default, pipeline-parallel, offload, QLoRA with
a stored measurement); every check below reads them with ``pdftotext`` / ``pdftoppm``.
Expected numbers are not typed in: they are the engine's own results for the same
plan, formatted the way the report promises (integers with thousands separators), so a
report that rounds, recomputes or mislabels a figure fails.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from report_helpers import PLANS, have_poppler, ink_share, page_images, pdf_info, pdf_text

from engine.estimate import Estimate, estimate
from engine.layout import GpuCounts, gpu_counts
from engine.planfile import PlanFile
from engine.validation import attach
from engine.validation.records import MeasuredRecord
from gui.views.layout_choice import validation_text

pytestmark = pytest.mark.skipif(not have_poppler(), reason="poppler-utils (pdftotext) missing")


@dataclass
class Written:
    path: Path
    pages: int
    est: Estimate
    counts: GpuCounts
    text: str
    rows: str  # pdftotext -layout: table rows kept on one line
    pf: PlanFile


def _qlora_with_record(pf: PlanFile) -> PlanFile:
    """A stored manual record: 1 GiB above the allocated peak's low end."""
    est = estimate(pf.plan)
    rec = MeasuredRecord(
        source="manual",
        label="bench",
        config_hash=pf.plan.config_hash(),
        max_allocated_bytes=est.peak.low + 2**30,
        world_size=8,
    )
    return attach(pf, [rec])[0]


@pytest.fixture(scope="module")
def reports(qapp: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Written]:
    from report_helpers import plan_for

    from gui.report import gather, write_pdf

    out: dict[str, Written] = {}
    folder = tmp_path_factory.mktemp("reports")
    for key in PLANS:
        plan = plan_for(key)
        pf = PlanFile(plan=plan, name=f"Report test {key}", notes=f"notes of the {key} plan")
        if key == "qlora":
            pf = _qlora_with_record(pf)
        path = folder / f"{key}.pdf"
        pages = write_pdf(gather(pf, "both"), path, "a4")
        est, counts = estimate(plan), gpu_counts(plan)
        out[key] = Written(path, pages, est, counts, pdf_text(path), pdf_text(path, True), pf)
    return out


@pytest.mark.parametrize("key", list(PLANS))
def test_key_figures_are_the_engines(reports: dict[str, Written], key: str) -> None:
    """The title page prints the per-rank peak compared with capacity as
    ``(low L B, high H B)`` with L, H = Estimate.fit_peak, and the three counts as
    ``1. Arithmetic minimum: N GPUs`` etc. with N from gpu_counts(plan); the validation
    range as the ranks of its layouts, with the node-rounded count beside it when
    rounding raised it (validation_text)."""
    w = reports[key]
    fit = w.est.fit_peak
    assert "Per-rank HBM peak: " in w.text
    assert f"(low {fit.low:,} B, high {fit.high:,} B)" in w.text
    c = w.counts
    n = c.arithmetic_min.gpus
    assert f"1. Arithmetic minimum: {n} GPU{'s' * (n != 1)}" in w.text
    assert f"2. First legal layout (procurement): {c.shape}" in w.text
    assert f"3. Validation range: {validation_text(c)}" in w.text
    lo, hi = c.validation_low.gpus, c.validation_high.gpus
    assert (str(lo) if lo == hi else f"{lo}–{hi}") in validation_text(c)
    assert w.est.config_hash in w.text  # the full SHA-256 on the title page
    assert f"Report test {key}" in w.text and f"notes of the {key} plan" in w.text


@pytest.mark.parametrize("key", list(PLANS))
def test_pages_sane_numbered_and_headed(reports: dict[str, Written], key: str) -> None:
    """pdfinfo agrees with the page count write_pdf returned; the footer numbers every
    page 'Page i of N'; the running header repeats the hash's first 16 digits."""
    w = reports[key]
    assert 4 <= w.pages <= 30
    info = pdf_info(w.path)
    assert int(info["Pages"]) == w.pages
    assert info["Page size"].startswith("595") and "A4" in info["Page size"]
    for i in (1, w.pages):
        assert f"Page {i} of {w.pages}" in w.text
    assert w.text.count(f"config {w.est.config_hash[:16]}") == w.pages


def test_layouts_page_prints_what_fits_the_plans_layout(reports: dict[str, Written]) -> None:
    """The layouts section ends with the fit searches of the plan's own layout: the
    largest micro-batch and the longest sequence are those largest_micro_batch() and
    longest_sequence() find for the same plan (PP 2 halves the layers per rank, so the
    pipeline plan fits a longer sequence than the default)."""
    from engine.whatif.fit import largest_micro_batch, longest_sequence

    for key in ("default", "pipeline"):
        w = reports[key]
        mb, seq = largest_micro_batch(w.pf.plan), longest_sequence(w.pf.plan)
        assert "What fits the plan's own layout" in w.text
        assert f"Largest micro-batch: {mb.answer} — {mb.reason}" in w.text
        assert f"Longest sequence: {seq.answer} — {seq.reason}" in w.text
    assert _seq(reports["pipeline"]) > _seq(reports["default"])


def _seq(w: Written) -> int:
    from engine.whatif.fit import longest_sequence

    value = longest_sequence(w.pf.plan).value
    assert value is not None
    return value


def test_ledger_rows_and_sources_printed(reports: dict[str, Written]) -> None:
    """Every HBM row of the heaviest stage appears with its exact low and high bytes
    side by side, and the totals row Σ n rows carries est.totals()['hbm'] to the byte;
    each cited source is expanded (title and URL)."""
    w = reports["default"]
    hbm_rows = [r for r in w.est.rows if r.location == "hbm"]
    for row in hbm_rows:
        assert f"{row.low:,} {row.high:,}" in w.rows, row.id
    hbm = w.est.totals()["hbm"]
    assert f"Σ {len(hbm_rows)} rows {hbm.low:,} {hbm.high:,}" in w.rows
    assert "Sources" in w.text and "https://pytorch.org" in w.text


def test_pipeline_report_has_stages(reports: dict[str, Written]) -> None:
    """PP 2 → the per-stage table lists both stages, the heaviest marked ▲."""
    w = reports["pipeline"]
    assert "Pipeline stages" in w.text
    heavy = w.est.stages[w.est.heaviest_stage]
    assert f"{heavy.stage}▲ {heavy.layers.start}–{heavy.layers.stop - 1}" in w.rows
    assert "Pipeline stages" not in reports["default"].text


def test_offload_report_host_figures(reports: dict[str, Written]) -> None:
    """Offload moves state to host RAM: the host peak per node is printed exactly, and
    the DeepSpeed appendix has its offload_optimizer block."""
    w = reports["offload"]
    lo, hi = w.est.nodes.host_peak
    assert f"Peak per node {_size_gb(lo, hi)}" in w.text
    assert f"{hi:,}" in w.text
    assert "offload_optimizer" in w.text
    assert "Appendix — generated framework configuration" in w.text
    # the plan's own stack (deepspeed, by auto from ZeRO-3) only: no torchtitan recipe
    assert "ds_config.json" in w.text and "memplan_recipe.py" not in w.text


def _size_gb(lo: int, hi: int) -> str:
    return f"{lo / 1e9:,.2f}–{hi / 1e9:,.2f} GB" if lo != hi else f"{lo / 1e9:,.2f} GB"


def test_measured_results_section(reports: dict[str, Written]) -> None:
    """The QLoRA plan stores a manual record of allocated = peak.low + 2³⁰ B; the report
    prints that measured value exactly and its verdict (inside when it is ≤ peak.high)."""
    w = reports["qlora"]
    peak = w.est.peak
    measured = peak.low + 2**30
    assert "Measured results" in w.text
    assert f"{measured:,}" in w.text
    verdict = "inside" if measured <= peak.high else "above"
    assert f"bench rank 0 — stage 0: {verdict}" in w.text
    assert "holds no measured runs yet" in reports["default"].text


def test_defaults_marked_and_validation_plan(reports: dict[str, Written]) -> None:
    """The pipeline plan sets pp = 2 and dp = 4 (defaults 1 and 8): the inputs table shows
    the default under them; the validation plan names the probe command and prints the
    allocated-peak threshold as its exact range."""
    t = reports["pipeline"].rows
    # the value, then (on the line under it) the default it replaced
    assert " pp 2 Pipeline-parallel stages (ranks). default 1 " in t
    assert " dp 4 Data-parallel size (ranks)" in t and " default 8 micro-batches" in t
    assert " tp 1 default " in t
    assert "memplan probe PLAN.memplan -o memplan_probe.py" in t
    # the thresholds are those of the layout the recommendation says to measure
    # (measuring.validation_target: the low end of a straddling range, else the
    # recommended layout), which the report worked out from the same content
    from gui.report import gather
    from gui.report.sections.recommendation import validation_target

    content = gather(reports["pipeline"].pf, "both")
    peak = validation_target(content).est.heaviest.peak
    assert f"low {peak.low:,} B" in t and f"high {peak.high:,} B" in t
    assert "inside [low, high]" in t


def test_charts_are_vector_and_pages_not_blank(reports: dict[str, Written], tmp_path: Path) -> None:
    """No raster image in the PDF (pdfimages lists none), chart labels are text, and
    every page of the pipeline report carries ink; the chart page carries the most."""
    w = reports["pipeline"]
    listing = subprocess.run(
        ["pdfimages", "-list", str(w.path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert len(listing) == 2, listing  # the header lines only
    assert "HBM per rank by phase" in w.text and "▲ Backward" in w.text
    shares = [ink_share(p) for p in page_images(w.path, tmp_path)]
    assert len(shares) == w.pages
    assert all(s > 0.003 for s in shares), shares
    assert max(shares) > 0.05, shares
