"""What the dashboard needs from a live session — the whole contract, in one place.

Why it exists: the dashboard is built and tested against recorded sessions long before (and
independently of) the real one in :mod:`gpudoctor.live.session`. Anything with these methods works.
Optional extras are looked up with ``getattr``: ``history() -> Sequence[Snapshot]`` (for the
sparklines) and ``select_rank(rank: int) -> None`` (when several ranks are watched).
"""

from __future__ import annotations

from typing import Protocol

from gpudoctor.live.samples import Snapshot


class DashboardSession(Protocol):
    def snapshot(self) -> Snapshot:
        """The latest merged readings and findings; must not block for long (≤ ~1 s)."""
        ...

    def profile(self, steps: int) -> object:
        """Arm a torch.profiler window of ``steps`` steps; progress shows in ``Snapshot.agent``."""
        ...

    def close(self) -> None:
        """Detach. The target keeps running."""
        ...
