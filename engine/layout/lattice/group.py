"""One regime's candidate layouts as a view of its ascending DP values, each layout built
when read.

A dense model's shape has thousands of candidate DPs, and the search reads a few of them
per regime: the largest, the ones its bisection probes, those it scans. So
:class:`engine.layout.proofs.regimes.SearchMemo` keeps each regime's DP values only, and
its windows and their slices are views of those lists (no copy); ``below``, ``between``
bisect the DP values directly. Every function here takes a plain list of layouts as well
(the tests' walks build those).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import overload

from engine.layout.lattice.point import Layout


def _dp(layout: Layout) -> int:
    return layout.dp


class Group(Sequence[Layout]):
    """The layouts ``make(d)`` of the DP values ``dps[lo:hi]`` (ascending), in order."""

    __slots__ = ("_dps", "_hi", "_lo", "_make")

    def __init__(self, dps: list[int], lo: int, hi: int, make: Callable[[int], Layout]) -> None:
        self._dps, self._lo, self._hi, self._make = dps, lo, hi, make  # lo ≤ hi

    def __len__(self) -> int:
        return self._hi - self._lo

    @overload
    def __getitem__(self, i: int) -> Layout: ...

    @overload
    def __getitem__(self, i: slice) -> Group: ...

    def __getitem__(self, i: int | slice) -> Layout | Group:
        if isinstance(i, slice):
            start, stop, step = i.indices(self._hi - self._lo)
            if step != 1:
                raise ValueError("a Group is sliced with step 1 only")
            return Group(self._dps, self._lo + start, self._lo + max(start, stop), self._make)
        n = self._hi - self._lo
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Group index out of range")
        return self._make(self._dps[self._lo + i])

    def __iter__(self) -> Iterator[Layout]:
        return map(self._make, self._dps[self._lo : self._hi])

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same layouts (a list the tests build)."""
        if isinstance(other, Sequence) and not isinstance(other, str):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to lists: unhashable as they are

    def __repr__(self) -> str:
        return f"Group({list(self)!r})"

    def dps(self) -> list[int]:
        """The DP values, ascending."""
        return self._dps[self._lo : self._hi]

    def span(self, above: int, upto: int | None) -> Group:
        """The layouts of DP above ``above`` and (unless None) at most ``upto``."""
        dps, lo, hi = self._dps, self._lo, self._hi
        start = bisect_right(dps, above, lo, hi)
        end = hi if upto is None else bisect_right(dps, upto, lo, hi)
        return Group(dps, start, max(start, end), self._make)  # empty when upto < above

    def below(self, dp: int) -> Group:
        """The layouts of DP below ``dp``."""
        end = bisect_left(self._dps, dp, self._lo, self._hi)
        return Group(self._dps, self._lo, end, self._make)


def below_dp(group: Sequence[Layout], dp: int) -> Sequence[Layout]:
    """The layouts of an ascending ``group`` with DP below ``dp``."""
    if group.__class__ is Group:  # the search's (no call: it asks thousands of times)
        return group.below(dp)
    return group[: bisect_left(group, dp, key=_dp)]


def dp_span(group: Sequence[Layout], above: int, upto: int | None) -> Sequence[Layout]:
    """The layouts of an ascending ``group`` of DP above ``above`` and (unless None) at
    most ``upto``."""
    if group.__class__ is Group:
        return group.span(above, upto)
    start = bisect_right(group, above, key=_dp)
    end = len(group) if upto is None else bisect_right(group, upto, key=_dp)
    return group[start:end]
