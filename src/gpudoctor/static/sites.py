"""The plain, picklable results of checking one file, before they become :class:`FactSet` objects.

Checkers run in worker processes when that pays, so what they return must be small and picklable:
a list of :class:`Site` (one code or config site with facts about it), project-wide flags (the
checked files together: does any file use CUDA, DDP, a GradScaler…), and the lines that carry an
inline ``# gpudoctor: ignore[...]``. Nothing here judges anything — rule files do that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gpudoctor.model import FactSet, FactValue, Location, Source

_IGNORE_RE = re.compile(r"#\s*gpudoctor:\s*ignore(?:\[([A-Za-z0-9_,\s-]*)\])?")


@dataclass
class Site:
    """One place in a file and the facts found there."""

    scope: str
    line: int
    col: int
    values: dict[str, FactValue]
    label: str = ""


@dataclass
class FileResult:
    """Everything one checker learned from one file."""

    path: str
    kind: str  # python | dockerfile | compose | k8s | shell | yaml | requirements
    sites: list[Site] = field(default_factory=list)
    flags: dict[str, bool] = field(default_factory=dict)
    ignores: dict[int, frozenset[str]] = field(default_factory=dict)  # line → codes ("*" = all)
    #: the modules the file imports (Python files): (level, dotted name, the names taken from it or
    #: None for the whole module); level 0 is absolute, ≥ 1 relative
    imports: list[tuple[int, str, tuple[str, ...] | None]] = field(default_factory=list)
    #: project flags set inside each top-level function or class, and by module-level code
    definition_flags: dict[str, list[str]] = field(default_factory=dict)
    module_flags: list[str] = field(default_factory=list)
    #: a script that runs on its own (a ``__main__`` guard or its own training loop)
    entry_point: bool = False
    #: classes of the file whose ``__getitem__`` only indexes what they hold (``pn.only_indexes``)
    in_memory_datasets: list[str] = field(default_factory=list)

    def add(self, scope: str, line: int, col: int, label: str = "", **values: FactValue) -> Site:
        site = Site(scope, line, col, dict(values), label)
        self.sites.append(site)
        return site

    def error(self, reason: str, message: str, line: int = 1, col: int = 1) -> None:
        """Record that (part of) the file could not be analysed."""
        self.add("file.error", line, col, label=reason, reason=reason, detail=message, kind=self.kind)

    def factsets(self) -> list[FactSet]:
        return [
            FactSet(scope=s.scope, source=Source.STATIC, values={**s.values, "file_kind": self.kind},
                    location=Location(path=self.path, line=s.line, col=s.col, label=s.label or None))
            for s in self.sites
        ]


def find_ignores(text: str) -> dict[int, frozenset[str]]:
    """Lines with ``# gpudoctor: ignore[GD301,GD1]`` (or a bare ``ignore`` for every rule).

    A comment on a line of its own also covers the next line, so that YAML, Dockerfiles and long
    Python statements can carry it above the offending line.
    """
    if "gpudoctor:" not in text:
        return {}
    out: dict[int, frozenset[str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = _IGNORE_RE.search(line)
        if not match:
            continue
        codes = frozenset(c.strip().upper() for c in (match.group(1) or "*").split(",") if c.strip()) or {"*"}
        out[number] = out.get(number, frozenset()) | codes
        if line.lstrip().startswith("#"):
            out[number + 1] = out.get(number + 1, frozenset()) | codes
    return out


def is_ignored(code: str, line: int | None, ignores: dict[int, frozenset[str]]) -> bool:
    if line is None or line not in ignores:
        return False
    codes = ignores[line]
    return "*" in codes or any(code.startswith(c) for c in codes)
