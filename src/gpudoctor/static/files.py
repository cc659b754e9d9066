"""Finds the files ``gpudoctor check`` should read and says what kind each one is.

Walking must survive anything a repository can hold: symlink loops (directory links are not
followed; file links are read once, by real path), virtual environments, ``node_modules``, binary,
empty, huge and non-UTF-8 files. It never reads a file's content except to classify YAML and
extension-less launch scripts, and it never raises for a file the user did not name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from gpudoctor.exitcodes import ExitCode, UserError

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
                       ".mypy_cache", ".ruff_cache", ".pytest_cache", ".eggs", "build", "dist"})
#: Files above this size are reported as not analysed instead of parsed.
MAX_FILE_BYTES = 8 * 1024 * 1024


def classify(path: Path) -> str | None:
    """``python`` | ``dockerfile`` | ``yaml`` | ``shell``, or None for files that are not checked."""
    name = path.name
    lower = name.lower()
    if lower.endswith(".py"):
        return "python"
    if lower in ("dockerfile", "containerfile") or lower.startswith("dockerfile.") or lower.endswith(".dockerfile"):
        return "dockerfile"
    if lower.endswith((".yaml", ".yml")):
        return "yaml"
    if lower.endswith((".sh", ".bash")):
        return "shell"
    return None


def iter_files(roots: Iterable[str]) -> Iterator[tuple[str, str]]:
    """Yield ``(path, kind)`` for every checkable file under ``roots``, each real file once.

    Raises:
        UserError: a root does not exist (exit 2).
    """
    seen: set[str] = set()
    for root in roots:
        base = Path(root)
        if not base.exists():
            raise UserError(f"{root}: no such file or directory.", ExitCode.USAGE)
        if base.is_file():
            kind = classify(base) or _sniff(base)
            if kind is None:
                raise UserError(f"{root}: not a Python file, Dockerfile, YAML manifest or shell script.",
                                ExitCode.USAGE)
            real = os.path.realpath(base)
            if real not in seen:
                seen.add(real)
                yield str(base), kind
            continue
        for directory, dirnames, filenames in os.walk(base, followlinks=False, onerror=None):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")
                                 and not os.path.isfile(os.path.join(directory, d, "pyvenv.cfg")))
            for filename in sorted(filenames):
                full = Path(directory, filename)
                kind = classify(full)
                if kind is None:
                    continue
                try:
                    if not full.is_file():  # a broken link, a fifo…
                        continue
                    real = os.path.realpath(full)
                except OSError:
                    continue
                if real in seen:
                    continue
                seen.add(real)
                yield str(full), kind


def _sniff(path: Path) -> str | None:
    """An explicitly named extension-less file: a shell script by its shebang."""
    try:
        with path.open("rb") as handle:
            head = handle.read(128)
    except OSError:
        return None
    first = head.split(b"\n", 1)[0]
    if first.startswith(b"#!") and (b"sh" in first.rsplit(b"/", 1)[-1]):
        return "shell"
    if first.startswith(b"#!") and b"python" in first:
        return "python"
    return None


def read_bytes(path: str) -> tuple[bytes | None, str]:
    """The file's bytes, or None and a reason (``too-large``, ``unreadable: …``, ``binary``)."""
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            return None, f"too-large: {size / 1048576:.1f} MiB (limit {MAX_FILE_BYTES // 1048576} MiB)"
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    if b"\x00" in data[:8192]:
        return None, "binary: the file contains NUL bytes"
    return data, ""
