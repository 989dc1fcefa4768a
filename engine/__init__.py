"""MemPlan's engine: a training plan in, a per-rank memory ledger out.

Pure Python with no Qt dependency, so the command line, the tests and the
layout search can run it anywhere; the GUI is just one more view of it.
"""

__version__ = "0.1.0"

FORMULA_VERSION = 10
"""The version of the engine's formulas: bumped whenever any ledger row's rule changes
(what a row counts, its formula, its default inputs), so the same plan can give other
bytes only under another formula version. Distinct from the app version (a release can
leave every formula alone, or change several). Printed in ``estimate --json``, stored
in saved files and on the report's title page, so a figure can be traced to the rules
that produced it; ``tests/golden/test_formula_version.py`` fails when the golden numbers
move while this stays the same."""
