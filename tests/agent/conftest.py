"""Fixtures for the agent tests (helpers live in agent_helpers.py)."""

from __future__ import annotations

from agent_helpers import target_factory

__all__ = ["target_factory"]
