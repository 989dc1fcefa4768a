"""The one spelling of the validation range, shared by the window, the CLI, the
comparison and the PDF report.

The range is GPUs to buy: the low estimate's count and the high estimate's, in that
order, which the search makes ascending (the low estimate never needs more). Its layouts
may use fewer ranks than are bought (a node rounds them up), and the ranks do not
ascend with the counts (a 4-rank layout can fit by the low estimate where a 2-rank one
fits by the high, both on one 4-GPU node): the ranks are written as their own ascending
range beside the count, never as a second "low–high" that reads backwards.
"""

from __future__ import annotations

from engine.layout.search.counts import GpuCounts


def ascending(low: int | None, high: int | None) -> str:
    """A GPU-count range, ascending and with equal ends written once ("4", "4–8"); an
    open end (no layout fits within the search) reads "at least 8", never "8–None"."""
    if high is None:
        return "none" if low is None else f"at least {low}"
    if low is not None and low > high:
        low, high = high, low
    return str(low) if low == high else f"{low}–{high}"


def validation_range(c: GpuCounts) -> str:
    """The validation range as GPUs to buy ("4–8 GPUs"), with the ranks its layouts use
    when they differ ("8 GPUs (layouts of 1–2 ranks)") and "(straddles)" when the low
    and high estimates disagree: the same words everywhere the range is shown."""
    lo, hi = c.validation_low, c.validation_high
    text = ascending(lo.gpus, hi.gpus)
    if text == "none":
        return "none found"
    text += " GPUs" if text != "1" else " GPU"
    if lo.layout is not None and hi.layout is not None:
        ranks = ascending(lo.layout.world_size, hi.layout.world_size)
        if ranks != ascending(lo.gpus, hi.gpus):
            text += f" (layouts of {ranks} rank{'s' if ranks != '1' else ''})"
    return text + (" (straddles)" if c.straddles else "")
