"""Offline fidelity grid: traced peak vs the ledger over families × stacks (a script).

    PYTHONPATH=. .venv/bin/python tests/fidelity_grid.py                 # standard grid
    PYTHONPATH=. .venv/bin/python tests/fidelity_grid.py --families llama,qwen3 \\
        --strategy plain,fsdp4,tp2 --method full,lora --precision bf16,mixed \\
        --optimizer adamw,sgd --recompute none,full --groups
    PYTHONPATH=. .venv/bin/python tests/fidelity_grid.py --cases         # the 11 measured cases
    PYTHONPATH=. .venv/bin/python tests/fidelity_grid.py --titan --seq 2048,8192 \\
        --world 1,8 --ac none,full,sac_op,sac_every2 --loss standard,chunked   # torchtitan

Every combination of the listed axis values is traced for every listed family (tiny
shapes: ``tests/trace/grid.py``, where families and axis values are added). Columns:
the traced peak, the ledger's low–high, the ledger midpoint's error ((mid − traced) ÷
traced), whether the traced peak is inside, whether the persistent model states equal
the ledger's (``ok``; ``ok*``: FSDP2's flat gradient buffer rounds once per unit),
and with ``--groups`` each ledger group's error at the peak. A case the
trace refuses prints its reason. Needs the ``memplan[trace]`` extra.

``--titan`` traces torchtitan's own code instead (``tests/trace/titan_grid.py``):
8B-shaped layers, 2 and 4 of them per setting, and prints for each AC mode the bytes
one layer saves per token, traced against the ledger's (docs/fidelity-grid.md).
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.trace.errors import TraceError
from engine.trace.extra import extra_problem
from tests.trace.grid import AXES, DEFAULTS, FAMILY_PRESET, Case, Measured, measure

STANDARD = {"strategy": ["plain", "fsdp4"], "method": ["full", "lora"]}
"""The default grid: every family, unsharded and FSDP2 × 4, full and LoRA (bf16)."""


def _row(m: Measured, groups: bool) -> str:
    states = m.states_verdict()
    line = (
        f"{m.case.name:<56} {m.traced / 1e6:>10.2f} {m.low / 1e6:>10.2f}–{m.high / 1e6:<10.2f} "
        f"{m.mid_error_percent:>+8.2f} {'yes' if m.inside else 'NO':>4} {states:>6}"
    )
    if groups:
        errs = m.group_errors()
        line += "   " + " ".join(
            f"{g}={'—' if e is None else f'{e:+.0f}%'}" for g, e in errs.items() if e != 0.0
        )
    return line


def run_grid(families: list[str], axes: dict[str, list[str]], groups: bool) -> int:
    head = (
        f"{'case (family-strategy-method-precision-optimizer-recompute)':<56} "
        f"{'traced MB':>10} {'ledger low–high MB':>21} {'mid err%':>8} {'in':>4} {'states':>6}"
    )
    print(head + ("   per-group error (mid − traced) ÷ traced" if groups else ""))
    print("-" * len(head))
    names = list(axes)
    outside = 0
    for family in families:
        for values in itertools.product(*(axes[a] for a in names)):
            case = Case(family, dict(zip(names, values, strict=True)))
            started = time.perf_counter()
            try:
                m = measure(case)
            except TraceError as exc:
                print(f"{case.name:<56} not traced: {exc}")
                continue
            outside += not m.inside
            print(_row(m, groups) + f"   {time.perf_counter() - started:.1f}s", flush=True)
    return outside


def run_cases() -> None:
    from engine.trace.runner import trace_plan
    from tests.measured_cases import load_cases, plan_for_case

    print(f"{'measured case':<60} {'traced B':>15} {'measured B':>15} {'error':>9}")
    for case in load_cases():
        r = trace_plan(plan_for_case(case))
        err = 100.0 * (r.peak_bytes - case.peak_bytes) / case.peak_bytes
        print(f"{case.name:<60} {r.peak_bytes:>15,} {case.peak_bytes:>15,} {err:>+8.4f}%")


def run_titan(args: argparse.Namespace) -> None:
    from tests.trace.titan_grid import TitanCase, measure_titan, per_layer_token_bytes

    def ints(text: str) -> list[int]:
        return [int(v) for v in text.split(",")]

    print(f"{'torchtitan case':<52} {'traced GB':>9} {'ledger low–high GB':>19} "
          f"{'mid err%':>8} {'in':>4} {'states':>6}")  # fmt: skip
    per_layer: dict[str, list[tuple[float, float, float]]] = {}
    for family, seq, batch, world, ac, loss in itertools.product(
        args.families.split(","), ints(args.seq), ints(args.batch), ints(args.world),
        args.ac.split(","), args.loss.split(","),
    ):  # fmt: skip
        pair = []
        for layers in (2, 4):
            case = TitanCase(family, layers, seq, batch, world, ac, loss)
            try:
                m = measure_titan(case)
            except TraceError as exc:
                print(f"{case.name:<52} not traced: {exc}")
                break
            pair.append(m)
            inside = "yes" if m.inside else "NO"
            print(f"{case.name:<52} {m.traced / 1e9:>9.3f} {m.low / 1e9:>9.3f}–"
                  f"{m.high / 1e9:<9.3f} {m.mid_error_percent:>+8.2f} "
                  f"{inside:>4} {m.states_verdict():>6}", flush=True)  # fmt: skip
        if len(pair) == 2:
            per_layer.setdefault(f"{family} {ac}", []).append(per_layer_token_bytes(*pair))
    print(f"\n{'AC mode':<22} {'traced B/token/layer':>20} {'ledger low–high':>21} {'mid err%':>8}")
    for key, values in per_layer.items():
        traced, low, high = (sum(v[i] for v in values) / len(values) for i in range(3))
        err = 100 * ((low + high) / 2 - traced) / traced
        print(f"{key:<22} {traced:>20,.0f} {low:>10,.0f}–{high:<10,.0f} {err:>+8.1f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--families", default=",".join(FAMILY_PRESET))
    for axis in DEFAULTS:
        parser.add_argument(f"--{axis}", help=f"comma list of: {', '.join(AXES[axis])}")
    parser.add_argument("--groups", action="store_true", help="per-group errors too")
    parser.add_argument("--cases", action="store_true", help="the shared measured cases")
    parser.add_argument("--titan", action="store_true", help="torchtitan's own code (8B layers)")
    parser.add_argument("--seq", default="2048", help="--titan: sequence lengths")
    parser.add_argument("--batch", default="1", help="--titan: local batch sizes")
    parser.add_argument("--world", default="8", help="--titan: FSDP2 fake world sizes")
    parser.add_argument("--ac", default="none,full,sac_op,sac_every2", help="--titan: AC modes")
    parser.add_argument("--loss", default="standard", help="--titan: standard,chunked")
    args = parser.parse_args()
    problem = extra_problem()
    if problem is not None:
        print(problem)
        return 1
    if args.cases:
        run_cases()
        return 0
    if args.titan:
        if args.families == ",".join(FAMILY_PRESET):
            args.families = "llama"
        run_titan(args)
        return 0
    chosen = {a: getattr(args, a).split(",") for a in DEFAULTS if getattr(args, a)}
    axes = chosen or dict(STANDARD)
    for axis, values in axes.items():
        unknown = [v for v in values if v not in AXES[axis]]
        if unknown:
            parser.error(f"--{axis}: unknown {unknown}; known: {', '.join(AXES[axis])}")
    outside = run_grid(args.families.split(","), axes, args.groups)
    print(f"\n{outside} case(s) outside the ledger's range")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
