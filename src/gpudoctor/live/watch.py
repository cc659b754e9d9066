"""The one watch loop behind ``attach --duration``, ``run`` and ``demo``: watch, maybe profile, stop on time.

Why one: the three commands each carried a copy, and the copies disagreed on what "the profile is
over" means and on how long to wait for it (``attach --duration 20 --profile 5`` once took 50 s).
:func:`watch` returns within ``duration_s + PROFILE_GRACE_S`` whatever the target does: the agent is
told the time the window may take, and a window still running at the deadline gets only the grace.
No textual/rich imports; the caller prints nothing but what ``say`` is given.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Protocol

from gpudoctor.live.samples import ProfileState, Snapshot

#: Seconds past the deadline a profile window (or its trace analysis) may still use.
PROFILE_GRACE_S = 3.0
#: At most this long to wait for the agent(s) to connect before asking for a profile window.
AGENT_WAIT_S = 15.0
#: Without a deadline (watch until the target exits), how long the agent may take over a window.
OPEN_ENDED_PROFILE_TIMEOUT_S = 120.0
POLL_S = 0.2


class Watchable(Protocol):
    """What the loop needs of a :class:`~gpudoctor.live.session.LiveSession`."""

    @property
    def target_alive(self) -> bool: ...
    def agents_settled(self) -> bool: ...
    def profile(self, steps: int, timeout_s: float = ...) -> str: ...
    def snapshot(self) -> Snapshot: ...
    def wait_until(self, predicate: Callable[[Snapshot], bool], timeout_s: float) -> bool: ...


def profile_over(snap: Snapshot) -> bool:
    """True when no profile window (of the target, or of every rank) is still running or being analysed."""
    state = snap.agent.profile_state
    own_over = state is None or state in (ProfileState.IDLE, ProfileState.DONE, ProfileState.FAILED)
    ranks = snap.rank_profile_status
    ranks_over = ranks is None or ranks.startswith(("analysed", "failed"))
    return own_over and ranks_over


def watch(session: Watchable, duration_s: float, profile_steps: int = 0,
          keep_going: Callable[[], bool] = lambda: True, say: Callable[[str], None] = lambda text: None) -> None:
    """Watch ``session`` for ``duration_s`` (``inf``: until the target exits or ``keep_going()`` is
    False), recording a ``profile_steps``-step profile window when asked; bounded as described above."""
    started = time.monotonic()
    deadline = started + duration_s

    def left() -> float:
        return deadline - time.monotonic()

    if profile_steps:
        # The agent connects (or is injected) in the background; give it a moment before asking.
        session.wait_until(lambda s: session.agents_settled() or not keep_going(), min(AGENT_WAIT_S, duration_s))
        timeout_s = OPEN_ENDED_PROFILE_TIMEOUT_S if math.isinf(duration_s) else max(1.0, left())
        say(session.profile(profile_steps, timeout_s=timeout_s))
    while left() > 0 and session.target_alive and keep_going():
        time.sleep(min(POLL_S, max(0.0, left())))
    if session.target_alive:  # a window (asked for, or the automatic one) nearly done may finish and be analysed
        session.wait_until(profile_over, PROFILE_GRACE_S)
