"""Every exit status gpudoctor returns, in one place. Scripts and CI depend on these numbers."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    OK = 0                    # nothing at or above --fail-on
    FINDINGS = 1              # findings at or above --fail-on (or a regression in `compare`); GD899, a file
                              # `check` could not analyse, is a warning and counts here (docs/bad-inputs.md)
    USAGE = 2                 # bad arguments (a numeric option NaN, infinite or out of range: cli.NUMERIC_OPTIONS),
                              # -o that names an input or cannot be written, an unreadable/corrupt/foreign input
                              # file, a trace with no usable event, a gzip that inflates past its bound
    NO_SUCH_PROCESS = 3       # the PID does not exist (or exited)
    NOT_PERMITTED = 4         # another user's process, ptrace refused
    NOT_PYTHON = 5            # the PID is not a Python process
    NO_GPU = 6                # a command that needs NVML/a GPU found none
    TARGET_FAILED = 7         # `gpudoctor run`: the training command itself failed to start
    UNTRUSTED_AGENT = 8       # the target's agent socket lies where its user does not own it alone (planted?)
    INTERNAL = 70             # a bug in gpudoctor (with a one-line message and a hint to report it)
    INTERRUPTED = 130         # Ctrl-C


class UserError(Exception):
    """An error the user caused: printed as one sentence, exits with ``code``, never a traceback."""

    def __init__(self, message: str, code: ExitCode = ExitCode.USAGE) -> None:
        super().__init__(message)
        self.code = code
