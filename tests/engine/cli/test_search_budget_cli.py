"""``--search-budget SECONDS`` on every command that searches GPU counts: the value
reaches the search (0: unbounded), so goldens and scripts can ask for answers that never
depend on the machine's speed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import engine.analysis as an
from engine.cli import main
from engine.layout.counts import SEARCH_BUDGET_S
from engine.plan import default_plan


@pytest.fixture
def budgets(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float | None]]:
    """The budget each GPU-count search was started with (the search itself runs)."""
    seen: list[float | None] = []
    real = an.gpu_counts

    def spy(plan: Any, max_gpus: int | None = None, **kw: Any) -> Any:
        seen.append(kw.get("budget_s"))
        return real(plan, max_gpus, **kw)

    monkeypatch.setattr(an, "gpu_counts", spy)
    an.forget_analyses()
    yield seen
    an.forget_analyses()


@pytest.mark.parametrize(
    ("command", "given", "expected"),
    [
        (["estimate"], [], SEARCH_BUDGET_S),
        (["estimate"], ["--search-budget", "0"], None),
        (["layouts", "--max-gpus", "16", "--no-levers"], ["--search-budget", "2.5"], 2.5),
        (["layouts", "--max-gpus", "16", "--no-levers"], ["--search-budget", "0"], None),
    ],
)
def test_the_budget_reaches_the_search(
    budgets: list[float | None],
    capsys: pytest.CaptureFixture[str],
    command: list[str],
    given: list[str],
    expected: float | None,
) -> None:
    assert main([*command, "--set", "policy.max_gpus=16", *given]) == 0
    capsys.readouterr()
    assert budgets == [expected]


def test_compare_passes_the_budget(
    budgets: list[float | None], capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    """compare searches each side within the same budget."""
    assert main(["new", "-o", str(tmp_path / "a.memplan"), "--set", "policy.max_gpus=16"]) == 0
    args = ["compare", str(tmp_path / "a.memplan"), "--set", "batch.seq_len=2048"]
    assert main([*args, "--search-budget", "0"]) == 0
    capsys.readouterr()
    assert budgets == [None, None]


@pytest.mark.parametrize("bad", ["-1", "nan", "soon"])
def test_a_bad_budget_is_a_usage_error(bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["layouts", "--search-budget", bad])
    assert exc.value.code == 2
    assert "--search-budget" in capsys.readouterr().err


def test_analyses_with_different_budgets_are_kept_apart() -> None:
    """A search stopped by a short budget may answer differently from an unbounded one, so
    the same plan under two budgets gets two analyses; the same budget gets the same."""
    an.forget_analyses()
    plan = default_plan()
    assert an.analysis(plan, None) is not an.analysis(plan, 5.0)
    assert an.analysis(plan, None) is an.analysis(plan, None)
    assert an.analysis(plan).search_budget_s == SEARCH_BUDGET_S
