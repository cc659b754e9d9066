"""How much a finding costs the user: the one enum the command line needs before anything else.

Why this exists apart from :mod:`gpudoctor.model` (which re-exports it): building the ``analyze``
parser needs the severity names for ``--fail-on``, and ``analyze`` forks its trace workers right
after parsing. The trace workers never use the model; its frozen dataclasses (~10 ms of import
self-time on a slow 2-core machine) are now created by the parent while they read, not before.
"""

from __future__ import annotations

import enum


class Severity(str, enum.Enum):
    """How much a finding costs the user, in rising order."""

    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        return _SEVERITY_RANK[self]

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, text: str) -> Severity:
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r}: use info, warning or critical") from None


_SEVERITY_RANK = {Severity.INFO: 0, Severity.WARNING: 1, Severity.CRITICAL: 2}

__all__ = ["Severity"]
