"""How ``run`` passes the user's signals on to its command, and how ``run``/``attach`` stop on them.

What must hold (issue 39): Ctrl-C, SIGTERM and SIGHUP reach the command exactly ONCE, as the user's
shell would have delivered them without gpudoctor in between, so a job that saves a checkpoint in
``except KeyboardInterrupt`` (or on SIGTERM) saves it whole; and gpudoctor itself never signals the
job on its own (no SIGTERM after a grace period: a save may take minutes).

- On a terminal, with gpudoctor in its foreground process group, the command stays in that group:
  the terminal sends Ctrl-C (SIGINT), Ctrl-\\ (SIGQUIT) and a hang-up (SIGHUP) to the whole group
  itself, so those are never sent again; a SIGTERM (``kill <gpudoctor>``) is forwarded.
- Otherwise (no terminal, a background job, CI, ``timeout``, a batch system) the command gets its own
  process group, so a signal to gpudoctor's group reaches gpudoctor only, and every SIGINT, SIGTERM
  and SIGHUP is forwarded, once.

The first signal stops gpudoctor's watch (:class:`Stopped`, a KeyboardInterrupt); later ones are
only passed on, so they cannot cut short the report or the agent's detach.
"""

from __future__ import annotations

import contextlib
import os
import signal
from types import FrameType
from typing import Any

#: The signals gpudoctor stops on (and, under ``run``, passes to the command).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: The signals a terminal sends to its whole foreground process group itself.
TERMINAL_SENT = frozenset({signal.SIGINT, signal.SIGQUIT, signal.SIGHUP})


class Stopped(KeyboardInterrupt):
    """The first SIGINT/SIGTERM/SIGHUP gpudoctor received: stop watching, report, detach."""

    def __init__(self, signum: int) -> None:
        super().__init__()
        self.signum = signum


def terminal_foreground() -> bool:
    """Whether gpudoctor has a controlling terminal and is in its foreground process group."""
    try:
        fd = os.open("/dev/tty", os.O_RDONLY | os.O_NOCTTY)
    except OSError:
        return False
    try:
        return os.tcgetpgrp(fd) == os.getpgrp()
    except OSError:
        return False
    finally:
        os.close(fd)


def signal_name(signum: int) -> str:
    with contextlib.suppress(ValueError):
        return signal.Signals(signum).name
    return f"signal {signum}"


class Relay:
    """Installed for the life of a command (or of an ``attach``): see the module docstring.

    ``shared_group``: the command runs in gpudoctor's own process group in the terminal's foreground
    (:func:`terminal_foreground`); ``pid``: the command's PID (None: pass nothing on — ``attach``).
    """

    def __init__(self, pid: int | None = None, shared_group: bool = False) -> None:
        self.pid = pid
        self.shared_group = shared_group
        self.received: list[int] = []   # every stop signal gpudoctor got, in order
        self.sent: list[int] = []       # what it passed to the command itself
        #: The dashboard has the terminal in raw mode: Ctrl-C is a key there, so a SIGINT/SIGQUIT that
        #: arrives came from ``kill`` and is passed on (a hang-up still reaches the whole group).
        self.terminal_raw = False
        self._previous: dict[int, Any] = {}

    @property
    def stopped(self) -> bool:
        return bool(self.received)

    def install(self) -> Relay:
        for signum in STOP_SIGNALS:
            self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()

    def __enter__(self) -> Relay:
        return self.install()

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.received.append(signum)
        terminal_sent = {signal.SIGHUP} if self.terminal_raw else TERMINAL_SENT
        if not (self.shared_group and signum in terminal_sent):
            self.send(signum)
        if len(self.received) == 1:
            raise Stopped(signum)

    def send(self, signum: int) -> None:
        """Pass ``signum`` to the command (never an error: it may have exited)."""
        if self.pid is None:
            return
        with contextlib.suppress(OSError):
            os.kill(self.pid, signum)
            self.sent.append(signum)

    def dashboard_interrupt(self) -> None:
        """Ctrl-C pressed in the dashboard: the terminal is raw there and sent nothing, so the command
        gets its SIGINT from here, once; it counts as gpudoctor's stop signal."""
        self.received.append(signal.SIGINT)
        self.send(signal.SIGINT)


def child_group_options(shared_group: bool) -> dict[str, Any]:
    """``subprocess.Popen`` keywords: the command's own process group unless it shares the terminal's."""
    if shared_group:
        return {}
    import sys

    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10
