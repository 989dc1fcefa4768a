"""A row's formula may be written when read (engine.ledger.row.Row.formula_src holds the
text or a function writing it): a row built either way reads the same text, and equals,
hashes and pickles the same; a function is called only when the formula is read."""

from __future__ import annotations

import pickle

from engine.estimate import estimate
from engine.ledger.row import Formula, Row, make_row
from engine.plan import default_plan, with_values


def _row(formula: Formula) -> Row:
    return make_row(
        id="hbm.test",
        label="test",
        state="activations",
        location="hbm",
        kind="peak",
        group="activations",
        low=1,
        high=2,
        formula=formula,
        source="memory-model",
    )


def test_a_lazy_formula_reads_equals_and_pickles_as_its_text() -> None:
    calls: list[int] = []

    def write() -> str:
        calls.append(1)
        return "1 × 2 = 2 B"

    lazy, eager = _row(write), _row("1 × 2 = 2 B")
    assert not calls  # built, not written
    assert lazy.formula == eager.formula == "1 × 2 = 2 B"
    assert lazy == eager and (lazy != eager) is False and hash(lazy) == hash(eager)
    assert lazy != _row("other")
    back = pickle.loads(pickle.dumps(lazy))
    assert back == eager and back.formula_src == "1 × 2 = 2 B"


def test_an_estimate_pickles_with_its_formulas() -> None:
    """The window's analysis process pickles estimates across: the text goes along."""
    est = estimate(with_values(default_plan(), {"batch.micro_batch": 3}))
    back = pickle.loads(pickle.dumps(est))
    assert back == est
    assert [r.formula for r in back.rows] == [r.formula for r in est.rows]
    assert all(isinstance(r.formula_src, str) for r in back.rows)
