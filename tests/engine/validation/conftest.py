"""Fixtures for validation tests (the fakes themselves are in validation_fakes.py)."""

from __future__ import annotations

import pytest
from validation_fakes import FakeCudaState


@pytest.fixture
def fake_cuda() -> FakeCudaState:
    return FakeCudaState()
