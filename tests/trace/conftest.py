"""Shared fixtures for the trace tests: where the real traces live (skip when they are absent)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


def trace_path(relative: str) -> Path:
    """A real trace under /work/shared/traces, or skip the test when that folder is absent."""
    path = TRACES / relative
    if not path.exists():
        pytest.skip(f"real trace {relative} not found under {TRACES}")
    return path


@pytest.fixture
def trace_file() -> Callable[[str], Path]:
    """The :func:`trace_path` helper as a fixture."""
    return trace_path
