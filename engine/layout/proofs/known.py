"""What the search has proven about one regime of one shape: the DPs known to fail and
the smallest known to fit (:class:`Known`), kept by
:class:`engine.layout.proofs.regimes.SearchMemo` across a ``gpu_counts`` call's searches."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from engine.layout.lattice.group import below_dp, dp_span
from engine.layout.lattice.point import Layout


@dataclass
class Known:
    """What the search has proven about one regime of one shape under one criterion:
    every candidate DP up to ``dead_upto`` fails, and ``fits_at`` (if known) is
    accepted. Kept across the growing bounds and the three counts' searches (the
    arithmetic minimum's relaxed shapes include the practical ones), so a regime a
    probe proved dead is never probed again below that DP."""

    dead_upto: int = 0
    fits_at: int | None = None

    def unknown(self, group: Sequence[Layout]) -> Sequence[Layout]:
        """The part of an ascending regime ``group`` whose answer is not yet known: above
        the proven failures, and no further than the smallest known fit."""
        return dp_span(group, self.dead_upto, self.fits_at)

    def learn(self, group: Sequence[Layout], found: Layout | None) -> None:
        """Record :meth:`_Shape.smallest`'s answer over ``group``: every layout before
        ``found`` (all of them when None) fails."""
        below = group if found is None else below_dp(group, found.dp)
        if below:
            self.dead_upto = max(self.dead_upto, below[-1].dp)
        if found is not None:
            self.fits_at = found.dp

    def learn_one(self, dp: int, accepted: bool, all_below_fail: bool) -> None:
        """Record one estimate made by the other criterion's search at ``dp`` of this
        regime, judged by this criterion: accepted, it bounds the regime's smallest fit
        from above; failing with every smaller DP of the regime (``all_below_fail``),
        every candidate up to ``dp`` fails."""
        if accepted:
            self.fits_at = dp if self.fits_at is None else min(self.fits_at, dp)
        elif all_below_fail:
            self.dead_upto = max(self.dead_upto, dp)
