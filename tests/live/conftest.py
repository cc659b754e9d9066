"""Fixtures for the live tests (helpers live in live_helpers.py)."""

from __future__ import annotations

from live_helpers import workload

__all__ = ["workload"]
