"""gpudoctor: why is my GPU training job slow, and how do I fix it?

This package's top level stays import-light: ``import gpudoctor`` inside a training script (for
``gpudoctor.step()``) must not pull in rich, textual or anything else heavy. The notebook API
(:func:`analyze`, :func:`check`, in :mod:`gpudoctor.api`) is imported only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpudoctor.api import CheckReport, TraceReport

__version__ = "0.1.0"
__all__ = ["analyze", "check", "install_agent", "step"]


def analyze(path_or_paths: Any, config: Any = None, jobs: int | None = None, per_step: bool = False) -> TraceReport:
    """Diagnose torch.profiler traces; see :func:`gpudoctor.api.analyze`."""
    from gpudoctor import api

    return api.analyze(path_or_paths, config=config, jobs=jobs, per_step=per_step)


def check(paths: Any = ".", env: bool = False, config: Any = None, jobs: int | None = None) -> CheckReport:
    """Static checks of code and deployment files; see :func:`gpudoctor.api.check`."""
    from gpudoctor import api

    return api.check(paths, env=env, config=config, jobs=jobs)


def step() -> None:
    """Mark a training-step boundary for the in-process agent (no-op when no agent runs)."""
    from gpudoctor.agent import runtime

    runtime.mark_step()


def install_agent() -> None:
    """Start the in-process agent explicitly (same as running under ``gpudoctor run``)."""
    from gpudoctor.agent import runtime

    runtime.install()
