"""A fast stand-in for ``memplan trace PLAN --json``, run as the window's trace process.

``python fake_trace.py PLAN MODE [GATE]``: prints the real progress lines on stderr
(``engine.trace.progress``) and, like the real command, the trace and its record as JSON
on stdout — the record of the hand-built result of ``tests/trace/test_records.py`` for
PLAN. MODE ``ok`` runs straight through; ``gate`` stops after step 1 until the file GATE
exists (so a test can act while a trace is running); ``hang`` stops after step 1 for
good (until killed); ``refuse`` exits 1 with a one-line reason, as a refused plan does.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from engine.planfile import load
from engine.trace.progress import format_line, step_message
from engine.trace.record import trace_record
from tests.trace.test_records import fake_result

REFUSAL = "DeepSpeed (ZeRO) cannot be traced: a stand-in reason"
POLL_S = 0.02


def say(message: str) -> None:
    print(format_line(0.1, message), file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    plan_path, mode = Path(argv[0]), argv[1]
    if mode == "refuse":
        print(f"memplan: {REFUSAL}", file=sys.stderr, flush=True)
        return 1
    pf = load(plan_path)
    say("build: fake on meta")
    print("a library warning that is not progress", file=sys.stderr, flush=True)
    say("shard: world 8, rank 0")
    say("materialise on fake cpu tensors")
    say(step_message(1, 2))
    if mode == "hang":
        while True:
            time.sleep(POLL_S)
    if mode == "gate":
        gate = Path(argv[2])
        while not gate.exists():
            time.sleep(POLL_S)
    say(step_message(2, 2))
    result = fake_result()
    say(f"done: peak {result.peak_bytes:,} B in backward")
    record = trace_record(pf.plan, result, pf.name)
    print(json.dumps({**result.to_json(), "record": record.to_json()}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
