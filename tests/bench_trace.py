"""How long a trace takes (a benchmark script, not a timed test).

    PYTHONPATH=. .venv/bin/python tests/bench_trace.py          # the default plan
    PYTHONPATH=. .venv/bin/python tests/bench_trace.py PLAN.memplan

The default plan is Llama-3.1-8B, FSDP2 × 8, sequence 4096, traced as rank 0 of 8.
Prints each stage's elapsed time, the wall and CPU seconds and the process's peak RSS.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.plan import default_plan
from engine.planfile import load
from engine.trace.runner import trace_plan


def main() -> int:
    plan = load(sys.argv[1]).plan if len(sys.argv) > 1 else default_plan()
    wall, cpu = time.perf_counter(), time.process_time()

    def say(message: str) -> None:
        print(f"[{time.perf_counter() - wall:6.1f} s] {message}", flush=True)

    result = trace_plan(plan, progress=say)
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(
        f"{plan.model.name}, world {plan.parallelism.world_size}, seq {plan.batch.seq_len}: "
        f"peak {result.peak_bytes:,} B; trace {result.wall_seconds:.1f} s wall "
        f"(process {time.perf_counter() - wall:.1f} s wall, {time.process_time() - cpu:.1f} s "
        f"CPU), peak RSS {rss_gib:.2f} GiB"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
