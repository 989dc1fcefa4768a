"""What-if sweeps: one input of a plan over a range of values, re-estimated at each.

The question an analyst asks before buying: "how far can the sequence (micro-batch,
LoRA rank, …) grow on this hardware, and how many data-parallel ranks does it take?".
A sweep answers it with one estimate per value: the peak HBM per rank (low–high, what
must fit), the limit and the capacity at that value, and the verdict. The fit boundary
is marked where the verdict changes. A value the plan cannot take (an out-of-range
field, a layout the engine refuses) is a point with its reason, never a crash: the
sweep of TP 1, 2, 3, 4 of a 64-head model reports TP 3 as invalid and goes on.

Values are written ``start:stop:xK`` (geometric: start, start·K, … up to stop),
``start:stop:+K`` (linear) or as a comma-separated list (``1,2,4`` or, for a
non-numeric field, ``zero1,zero2,zero3``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from engine.errors import PlanError
from engine.estimate import Estimate, Verdict, estimate
from engine.plan import Plan, describe_validation_error, get_value, with_values

MAX_POINTS = 256
"""Most values one sweep estimates: enough for any range an analyst charts, and a
guard against a typo (``1:100000:+1``) that would re-estimate for minutes."""

Progress = Callable[[int, int], bool]
"""Called after each value with (done, total); returning False stops the sweep."""


class SweepSpecError(ValueError):
    """A ``--vary`` text that names no field or no values; ``str()`` says which."""


@dataclass(frozen=True, slots=True)
class SweepSpec:
    """What to vary: a dotted field path and the values, in sweep order."""

    path: str
    values: tuple[Any, ...]
    text: str = ""  # the range as written (for titles and reports)


@dataclass(frozen=True, slots=True)
class SweepPoint:
    """The plan re-estimated at one value (or why it could not be)."""

    value: Any
    low: int | None = None  # peak per rank that must fit the capacity (fit peak)
    high: int | None = None
    limit: int | None = None
    capacity: int | None = None
    verdict: Verdict | None = None
    reason: str = ""  # the verdict's reason, or why the value is invalid

    @property
    def ok(self) -> bool:
        return self.verdict is not None

    @property
    def fits(self) -> bool:
        return self.verdict == "fits"


@dataclass(frozen=True, slots=True)
class Boundary:
    """Where the verdict changes: the last value that fits before values that do not
    (``largest``), or the first that fits after values that do not (``smallest``,
    e.g. data-parallel ranks, whose growth shrinks the peak)."""

    kind: Literal["largest", "smallest"]
    index: int
    value: Any

    def words(self, path: str) -> str:
        return f"{self.kind} {path} that fits: {show_value(self.value)}"


@dataclass(frozen=True)
class Sweep:
    """Every point of one sweep, for the plan of ``base_hash``."""

    path: str
    points: tuple[SweepPoint, ...]
    base_hash: str
    base_value: Any
    text: str = ""
    cancelled: bool = False  # stopped before the last value (points so far are kept)
    requested: int = 0  # values asked for (len(points) unless cancelled)

    @property
    def boundary(self) -> Boundary | None:
        """The fit boundary, or None when every valid value fits or none does."""
        ok = [(i, p) for i, p in enumerate(self.points) if p.ok]
        fitting = [i for i, p in ok if p.fits]
        if not fitting or len(fitting) == len(ok):
            return None
        if not ok[-1][1].fits:
            i = fitting[-1]
            return Boundary("largest", i, self.points[i].value)
        i = fitting[0]
        return Boundary("smallest", i, self.points[i].value)

    def summary(self) -> str:
        """One sentence on where the plan stops fitting along the sweep."""
        ok = [p for p in self.points if p.ok]
        bad = len(self.points) - len(ok)
        invalid = f"; {bad} value(s) cannot be estimated" if bad else ""
        if not ok:
            return f"no value of {self.path} can be estimated{invalid}"
        b = self.boundary
        if b is not None:
            return b.words(self.path) + invalid
        if all(p.fits for p in ok):
            return f"every value of {self.path} swept fits{invalid}"
        return f"no value of {self.path} swept fits{invalid}"


def show_value(value: Any) -> str:
    """A swept value as text: thousands separators, ``g`` floats, bare strings."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    return value if isinstance(value, str) else json.dumps(value)


def _number(text: str, what: str) -> float:
    try:
        got = float(text)
    except ValueError:
        raise SweepSpecError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(got):
        raise SweepSpecError(f"{what} must be finite, got {text!r}")
    return got


def _range(text: str) -> list[float]:
    parts = text.split(":")
    if len(parts) != 3:
        raise SweepSpecError(
            f"a range is start:stop:xK (geometric) or start:stop:+K (linear), got {text!r}"
        )
    start, stop = _number(parts[0], "start"), _number(parts[1], "stop")
    step = parts[2].strip()
    if start > stop:
        raise SweepSpecError(f"start {parts[0]} is larger than stop {parts[1]}")
    if step[:1] in ("x", "*"):
        factor = _number(step[1:], "the factor after x")
        if factor <= 1 or start <= 0:
            raise SweepSpecError("a geometric range needs start > 0 and a factor above 1")
        count = math.floor(math.log(stop / start, factor) + 1e-9) + 1
        values = [start * factor**k for k in range(count)]
    elif step[:1] == "+":
        inc = _number(step[1:], "the step after +")
        if inc <= 0:
            raise SweepSpecError("a linear range needs a step above 0")
        count = math.floor((stop - start) / inc + 1e-9) + 1
        values = [start + inc * k for k in range(count)]
    else:
        raise SweepSpecError(f"the step must start with x (geometric) or + (linear), got {step!r}")
    if count > MAX_POINTS:
        raise SweepSpecError(f"{count} values: a sweep takes at most {MAX_POINTS}")
    return values


def _as_field_type(values: Sequence[float], current: Any, path: str) -> tuple[Any, ...]:
    """Range values typed like the field: whole numbers for an integer field (rounded,
    repeats dropped, as a geometric range of 1.5 gives), floats otherwise."""
    if isinstance(current, bool) or not isinstance(current, int | float | None):
        raise SweepSpecError(f"{path} is not numeric: give a list of values (a,b,c)")
    if isinstance(current, float):
        return tuple(values)
    out: list[int] = []
    for v in values:
        n = round(v)
        if current is None and abs(v - n) > 1e-9:
            return tuple(values)  # an unset optional field: keep what was asked
        if n not in out:
            out.append(n)
    return tuple(out)


def _list(text: str, current: Any) -> tuple[Any, ...]:
    out: list[Any] = []
    for item in text.split(","):
        raw = item.strip()
        if not raw:
            raise SweepSpecError(f"empty value in the list {text!r}")
        try:
            value: Any = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if isinstance(current, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        out.append(value)
    if len(out) > MAX_POINTS:
        raise SweepSpecError(f"{len(out)} values: a sweep takes at most {MAX_POINTS}")
    return tuple(out)


def parse_values(text: str, current: Any, path: str = "the field") -> tuple[Any, ...]:
    """The values a range or list names, typed like ``current`` (the field's value)."""
    text = text.strip()
    if not text:
        raise SweepSpecError("no values given")
    if ":" in text:
        return _as_field_type(_range(text), current, path)
    return _list(text, current)


def parse_vary(item: str, plan: Plan) -> SweepSpec:
    """``path=values`` (``batch.seq_len=1024:32768:x2``) for ``plan``."""
    if "=" not in item:
        raise SweepSpecError(
            f"expected FIELD=VALUES, e.g. batch.seq_len=1024:32768:x2; got {item!r}"
        )
    path, text = (s.strip() for s in item.split("=", 1))
    try:
        current = get_value(plan, path)
    except KeyError as exc:
        raise SweepSpecError(str(exc.args[0])) from exc
    if isinstance(current, dict | list):
        raise SweepSpecError(f"{path} is a group of fields: name one of its fields")
    return SweepSpec(path, parse_values(text, current, path), text)


def _changes(plan: Plan, path: str, value: Any) -> dict[str, Any]:
    """The edit one sweep point makes: the value, and with a global batch set, the
    accumulation that keeps it when DP or the micro-batch moves (a set global batch is a
    hyperparameter: :func:`engine.layout.point.keeps_global_batch`). Where no whole
    accumulation reaches it, the plan's own rule says why."""
    b, par = plan.batch, plan.parallelism
    if b.global_batch is None or path not in ("parallelism.dp", "batch.micro_batch"):
        return {path: value}
    mb = value if path == "batch.micro_batch" else b.micro_batch
    dp = value if path == "parallelism.dp" else par.dp
    per = mb * dp if isinstance(mb, int) and isinstance(dp, int) and mb * dp > 0 else 0
    if not per or b.global_batch % per:
        return {path: value}
    return {path: value, "batch.grad_accum": b.global_batch // per}


def _point(plan: Plan, path: str, value: Any, est: Callable[[Plan], Estimate]) -> SweepPoint:
    try:
        varied = with_values(plan, _changes(plan, path, value))
    except ValidationError as exc:
        return SweepPoint(value, reason="; ".join(describe_validation_error(exc)))
    try:
        e = est(varied)
    except PlanError as exc:
        return SweepPoint(value, reason=str(exc))
    peak = e.fit_peak
    return SweepPoint(
        value, peak.low, peak.high, e.limit_bytes, e.capacity_bytes, e.verdict, e.verdict_reason
    )


def _decisive(plan: Plan) -> Estimate:
    """Only the stages that can be the heaviest: the same verdict and peaks, faster."""
    return estimate(plan, decisive_only=True)


def sweep(
    plan: Plan,
    spec: SweepSpec,
    estimator: Callable[[Plan], Estimate] | None = None,
    progress: Progress | None = None,
) -> Sweep:
    """Re-estimate ``plan`` at every value of ``spec``, in order.

    ``progress`` is told after each value and may stop the sweep by returning False;
    the points computed so far are kept and the result says it was cancelled.
    """
    est = estimator or _decisive
    points: list[SweepPoint] = []
    total = len(spec.values)
    cancelled = False
    for value in spec.values:
        points.append(_point(plan, spec.path, value, est))
        if progress is not None and not progress(len(points), total) and len(points) < total:
            cancelled = True
            break
    return Sweep(
        path=spec.path,
        points=tuple(points),
        base_hash=plan.config_hash(),
        base_value=get_value(plan, spec.path),
        text=spec.text,
        cancelled=cancelled,
        requested=total,
    )
