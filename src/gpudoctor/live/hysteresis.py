"""Keeps live findings steady: a finding shows after it held in N consecutive windows, and goes
away only after M consecutive windows without it — so a dashboard never flaps.

Pure bookkeeping over :class:`~gpudoctor.model.Finding` keys (rule code + place); no threads.
"""

from __future__ import annotations

from collections.abc import Iterable

from gpudoctor.model import Finding, sort_findings


class Hysteresis:
    """Feed each window's raw findings to :meth:`update`; it returns the findings to show."""

    def __init__(self, on_windows: int = 2, off_windows: int = 2) -> None:
        self.on_windows = max(1, on_windows)
        self.off_windows = max(1, off_windows)
        self._hits: dict[tuple[str, str], int] = {}
        self._misses: dict[tuple[str, str], int] = {}
        self._latest: dict[tuple[str, str], Finding] = {}
        self._active: set[tuple[str, str]] = set()
        self.first_seen: dict[tuple[str, str], float] = {}   # key → time it became active

    def update(self, raw: Iterable[Finding], now: float) -> list[Finding]:
        seen = set()
        for finding in raw:
            key = finding.key
            seen.add(key)
            self._hits[key] = self._hits.get(key, 0) + 1
            self._misses[key] = 0
            self._latest[key] = finding
            if key not in self._active and self._hits[key] >= self.on_windows:
                self._active.add(key)
                self.first_seen.setdefault(key, now)
        for key in list(self._latest):
            if key in seen:
                continue
            self._hits[key] = 0
            self._misses[key] = self._misses.get(key, 0) + 1
            if key in self._active and self._misses[key] >= self.off_windows:
                self._active.discard(key)
            if key not in self._active:
                del self._latest[key]
        return sort_findings([self._latest[k] for k in self._active])
