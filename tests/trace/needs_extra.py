"""The skip mark for tests that run a trace: they need the optional extra."""

from __future__ import annotations

import pytest

from engine.trace.extra import extra_problem

needs_trace_extra = pytest.mark.skipif(
    extra_problem() is not None,
    reason="the memplan[trace] extra (torch 2.13.0, transformers, peft) is not installed",
)
