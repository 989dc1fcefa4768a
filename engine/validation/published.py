"""Published real-GPU measurements as the yardstick: load the cases, build each case's
plan, estimate it and compare on the figure the source measured.

Why: traces on fake tensors check the ledger against the code it models, but an analyst
buys GPUs for jobs run with torchtitan, Megatron-Core, DeepSpeed, HF Trainer + PEFT and
torchtune. The suite in ``tests/data/published/cases.jsonl`` holds runs someone measured
on real GPUs and published (each with its URL and the exact quote), and this module says
how far MemPlan is from each (issue 35, "What to build", first bullet).

A case's ``measured.basis`` decides what it is compared with (the suite's README):

==========  ==========================================  ====================================
basis       what was measured                           MemPlan's figure
==========  ==========================================  ====================================
allocated   ``torch.cuda.max_memory_allocated``         ``Estimate.peak``
reserved    ``torch.cuda.max_memory_reserved``          the heaviest stage's reserved peak
device      nvidia-smi / NVML / W&B GPU memory          the heaviest stage's device peak
fits        the job ran on that card (no figure)        the fit peak's low ≤ the capacity
==========  ==========================================  ====================================

*Inside* means MemPlan's [low, high] overlaps the published [low, high] (a band where the
source's unit is ambiguous; a single printed figure spans half its last digit each
side, :mod:`engine.validation.printed`). The *error* is that of MemPlan's midpoint against the
published midpoint, in percent of the published one: positive when MemPlan says more.
A verdict *contradicts* the run when MemPlan calls a job that ran on the card
``does_not_fit``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import ValidationError

from engine.errors import PlanError
from engine.estimate import Estimate, Verdict, estimate
from engine.plan import Plan, default_plan, describe_validation_error, with_values
from engine.presets import accelerator_changes, accelerators, model_section_for
from engine.units import GiB
from engine.validation.printed import half_step_gib

Basis = Literal["allocated", "reserved", "device", "fits"]
BASES: tuple[Basis, ...] = ("allocated", "reserved", "device", "fits")

CASES_PATH = Path(__file__).resolve().parents[2] / "tests" / "data" / "published" / "cases.jsonl"
"""The suite's cases, in the checkout (the data are test data: a bundle without the
``tests`` folder has no suite, and the command says so)."""


_GITHUB_REF = re.compile(r"^(https://github\.com/[^/]+/[^/]+)/(?:blob|tree)/[^/]+/")


class CaseError(ValueError):
    """A case file line that is not a well-formed case (the message names the case)."""


@dataclass(frozen=True, slots=True)
class PublishedCase:
    """One published measurement: where it was read, what it measured, and the plan
    (a model preset plus dotted-path overrides) that describes the job."""

    id: str
    stack: str
    url: str
    where: str
    quote: str
    basis: Basis
    low_gib: float | None  # None for a ``fits`` case (no figure)
    high_gib: float | None
    as_published: str
    expressible: bool
    missing: tuple[str, ...]  # the knobs MemPlan cannot express (empty when expressible)
    preset: str | None
    changes: Mapping[str, Any]

    @property
    def source_key(self) -> str:
        """The source, for counting independent sources: the URL without its anchor, and
        a GitHub file without the commit or branch it was read at (one README read at two
        commits is one source)."""
        url = self.url.split("#", 1)[0].rstrip("/")
        return _GITHUB_REF.sub(r"\1/", url)


def _need(raw: Mapping[str, Any], key: str, case: str) -> Any:
    if key not in raw:
        raise CaseError(f"case {case!r}: missing {key!r}")
    return raw[key]


def parse_case(raw: Mapping[str, Any]) -> PublishedCase:
    """A case from its JSON object; :class:`CaseError` names what is missing or wrong."""
    cid = str(raw.get("id", "?"))
    source, measured = _need(raw, "source", cid), _need(raw, "measured", cid)
    memplan = _need(raw, "memplan", cid)
    basis = _need(measured, "basis", cid)
    if basis not in BASES:
        raise CaseError(f"case {cid!r}: basis {basis!r} is not one of {', '.join(BASES)}")
    low, high = measured.get("low_gib"), measured.get("high_gib")
    if basis != "fits" and (low is None or high is None or not 0 < low <= high):
        raise CaseError(f"case {cid!r}: a {basis} case needs 0 < low_gib <= high_gib")
    expressible = _need(raw, "expressible", cid)
    if expressible not in ("yes", "no"):
        raise CaseError(f"case {cid!r}: expressible must be 'yes' or 'no'")
    missing = tuple(str(k) for k in raw.get("missing", ()))
    if (expressible == "no") != bool(missing):
        raise CaseError(f"case {cid!r}: 'missing' names the knobs exactly when not expressible")
    if not str(_need(raw, "quote", cid)).strip() or not str(_need(source, "url", cid)):
        raise CaseError(f"case {cid!r}: a case needs its source URL and the exact quote")
    return PublishedCase(
        id=cid,
        stack=str(_need(raw, "stack", cid)),
        url=str(source["url"]),
        where=str(source.get("where", "")),
        quote=str(raw["quote"]),
        basis=cast(Basis, basis),
        low_gib=None if low is None else float(low),
        high_gib=None if high is None else float(high),
        as_published=str(measured.get("as_published", "")),
        expressible=expressible == "yes",
        missing=missing,
        preset=memplan.get("preset"),
        changes=dict(memplan.get("set", {})),
    )


def load_cases(path: Path = CASES_PATH) -> tuple[PublishedCase, ...]:
    """Every case of a JSON-lines file, in file order; ids must be unique."""
    cases: list[PublishedCase] = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except ValueError as exc:
            raise CaseError(f"{path.name} line {n}: not JSON ({exc})") from exc
        cases.append(parse_case(raw))
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise CaseError(f"{path.name}: duplicate case ids")
    return tuple(cases)


def case_plan(case: PublishedCase) -> Plan:
    """The case's plan, built as ``memplan estimate --preset P --set …`` builds it: the
    default plan, the model preset, then the overrides (an accelerator key brings its
    preset's figures unless the case sets them, as in :mod:`engine.cli.common`)."""
    plan = default_plan()
    if case.preset:
        plan = Plan.model_validate(
            {
                **plan.model_dump(mode="json"),
                "model": model_section_for(case.preset).model_dump(mode="json"),
            }
        )
    changes = dict(case.changes)
    key = changes.get("hardware.accelerator")
    if isinstance(key, str) and key in {a.key for a in accelerators()}:
        changes = {**{k: v for k, v in accelerator_changes(key).items()}, **changes}
    return with_values(plan, changes)


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case against MemPlan: the figure compared, inside or not, the error."""

    case: PublishedCase
    low: int | None  # MemPlan's bytes on the case's basis (None: no estimate)
    high: int | None
    capacity: int | None
    verdict: Verdict | None
    inside: bool
    error_pct: float | None  # MemPlan mid vs published mid, % of published (+: MemPlan more)
    problem: str = ""  # why there is no estimate (the plan refused), else empty

    @property
    def contradicts(self) -> bool:
        """MemPlan calls a job that ran on its card impossible."""
        return self.verdict == "does_not_fit"


def basis_range(est: Estimate, basis: Basis) -> tuple[int, int]:
    """MemPlan's [low, high] bytes on a basis (``fits``: the fit peak)."""
    h = est.heaviest
    r = {
        "allocated": est.peak,
        "reserved": h.reserved_peak,
        "device": h.device_peak,
        "fits": est.fit_peak,
    }[basis]
    return r.low, r.high


def compare(case: PublishedCase, low: int, high: int, capacity: int) -> tuple[bool, float | None]:
    """Inside or not, and the signed midpoint error in percent (None for ``fits``). A
    single printed figure is the interval its last digit allows
    (:func:`~engine.validation.printed.half_step_gib`); the error is against the figure."""
    if case.basis == "fits" or case.low_gib is None or case.high_gib is None:
        return low <= capacity, None
    p_low, p_high = case.low_gib * GiB, case.high_gib * GiB
    p_mid = (p_low + p_high) / 2
    half = half_step_gib(case.as_published, case.low_gib, case.high_gib) * GiB
    inside = low <= p_high + half and high >= p_low - half
    return inside, ((low + high) / 2 - p_mid) / p_mid * 100


def evaluate(case: PublishedCase) -> CaseResult:
    """Build the case's plan, estimate it and compare (a plan MemPlan refuses is a
    result with its reason, outside, not an exception: the table shows every case)."""
    try:
        est = estimate(case_plan(case))
    except ValidationError as exc:
        return _refused(case, "; ".join(describe_validation_error(exc, "plan")))
    except (PlanError, KeyError) as exc:
        return _refused(case, str(exc))
    low, high = basis_range(est, case.basis)
    inside, error = compare(case, low, high, est.capacity_bytes)
    return CaseResult(case, low, high, est.capacity_bytes, est.verdict, inside, error)


def _refused(case: PublishedCase, why: str) -> CaseResult:
    return CaseResult(case, None, None, None, None, False, None, why)


@dataclass(frozen=True, slots=True)
class Summary:
    """The suite in one line: cases, sources, inside of expressible, median |error|,
    contradicted verdicts."""

    cases: int
    sources: int
    expressible: int
    inside: int
    median_abs_error_pct: float | None
    contradicted: int  # expressible cases MemPlan calls impossible on their card
    contradicted_all: int  # every case, the not-expressible approximations included

    def line(self) -> str:
        med = "n/a" if self.median_abs_error_pct is None else f"{self.median_abs_error_pct:.1f} %"
        return (
            f"{self.cases} cases from {self.sources} sources: inside {self.inside} of "
            f"{self.expressible} expressible, median |error| {med} (expressible), "
            f"contradicted verdicts {self.contradicted} of {self.expressible} expressible "
            f"({self.contradicted_all} of {self.cases} with the approximations)"
        )


def _median(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def summarize(results: Sequence[CaseResult]) -> Summary:
    expr = [r for r in results if r.case.expressible]
    errors = [abs(r.error_pct) for r in expr if r.error_pct is not None]
    return Summary(
        cases=len(results),
        sources=len({r.case.source_key for r in results}),
        expressible=len(expr),
        inside=sum(r.inside for r in expr),
        median_abs_error_pct=_median(errors),
        contradicted=sum(r.contradicts for r in expr),
        contradicted_all=sum(r.contradicts for r in results),
    )


def run_suite(path: Path = CASES_PATH) -> tuple[tuple[CaseResult, ...], Summary]:
    """Every case evaluated, and the summary."""
    results = tuple(evaluate(c) for c in load_cases(path))
    return results, summarize(results)


@lru_cache(maxsize=1)
def suite_summary() -> Summary | None:
    """The suite's summary for the report's method text, worked out once per process
    (None where the suite is not there: a bundle without the tests folder)."""
    if not CASES_PATH.is_file():
        return None
    return run_suite()[1]
