"""Print estimate vs measured for every reference case (a script, not a timed test).

    PYTHONPATH=. python tests/fidelity_table.py

Columns: measured allocated peak; the estimate's allocated peak low–high and midpoint;
the midpoint's error; whether the measured peak is inside the range; and the same for
the saved activations after forward (estimate = the saved rows' midpoints).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.errors import PlanError
from engine.estimate import Estimate, estimate
from tests.measured_cases import CASES_PATH, Case, load_cases, plan_for_case

SAVED_PREFIXES = ("hbm.activations.saved.", "hbm.loss.saved", "hbm.loss.labels")


def saved_mid(est: Estimate) -> int:
    """Saved-after-forward estimate: every saved row's midpoint."""
    return sum(r.mid for r in est.rows if r.id.startswith(SAVED_PREFIXES))


def compare(case: Case) -> dict[str, object]:
    est = estimate(plan_for_case(case))
    peak = est.peak
    mid = (peak.low + peak.high) / 2
    saved = saved_mid(est)
    return {
        "name": case.name,
        "measured": case.peak_bytes,
        "low": peak.low,
        "high": peak.high,
        "mid": mid,
        "err": (mid - case.peak_bytes) / case.peak_bytes,
        "inside": peak.low <= case.peak_bytes <= peak.high,
        "phase": f"{est.heaviest.peak_phase}",
        "saved_measured": case.saved_activations,
        "saved": saved,
        "saved_err": (saved - case.saved_activations) / case.saved_activations,
    }


def main() -> int:
    if not CASES_PATH.exists():
        print(f"no measured cases at {CASES_PATH}")
        return 1
    cases = load_cases()
    head = (
        f"{'case':<56} {'measured GB':>11} {'est. low–high GB':>17} {'mid err':>8} "
        f"{'in':>3} {'phase':>8} | {'saved meas.':>11} {'saved est.':>10} {'err':>7}"
    )
    print(head)
    print("-" * len(head))
    for case in cases:
        try:
            r = compare(case)
        except (PlanError, NotImplementedError) as exc:
            print(f"{case.name:<56} not computable yet: {exc}")
            continue
        print(
            f"{r['name']:<56} {r['measured'] / 1e9:>11.3f} "  # type: ignore[operator]
            f"{r['low'] / 1e9:>8.3f}–{r['high'] / 1e9:<8.3f} "  # type: ignore[operator]
            f"{r['err']:>+8.2%} {'yes' if r['inside'] else 'NO':>3} {r['phase']:>8} | "
            f"{r['saved_measured'] / 1e9:>11.3f} {r['saved'] / 1e9:>10.3f} "  # type: ignore[operator]
            f"{r['saved_err']:>+7.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
