"""gpudoctor: why is my GPU training job slow, and how do I fix it?

This package's top level stays import-light: ``import gpudoctor`` inside a training script (for
``gpudoctor.step()``) must not pull in rich, textual or anything else heavy.
"""

from __future__ import annotations

__version__ = "0.1.0"


def step() -> None:
    """Mark a training-step boundary for the in-process agent (no-op when no agent runs)."""
    from gpudoctor.agent import runtime

    runtime.mark_step()


def install_agent() -> None:
    """Start the in-process agent explicitly (same as running under ``gpudoctor run``)."""
    from gpudoctor.agent import runtime

    runtime.install()
