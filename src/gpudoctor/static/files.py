"""Finds the files ``gpudoctor check`` should read and says what kind each one is.

Walking must survive anything a repository can hold: symlink loops (directory links are not
followed; file links are read once, by real path), virtual environments, ``node_modules``, binary,
empty, huge and non-UTF-8 files, FIFOs and devices (opened non-blocking and refused by ``fstat``). It
never reads a file's content except to classify YAML and extension-less launch scripts, and it never
raises for a file the user did not name; a named file that cannot be analysed is reported by
:func:`named_file_problem`, and ``check`` exits 2 for it.
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import io
import os
import stat
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

from gpudoctor.boundedio import InputFileError, read_regular_file
from gpudoctor.exitcodes import ExitCode, UserError

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
                       ".mypy_cache", ".ruff_cache", ".pytest_cache", ".eggs", "build", "dist"})
#: Files above this size are reported as not analysed instead of parsed.
MAX_FILE_BYTES = 8 * 1024 * 1024
#: Python files above this size are reported as not analysed (GD899 too-large) instead of parsed:
#: ``ast`` holds ~400 bytes per byte of source, so a 7.9 MiB file of ``x = 1`` lines took 41 s and
#: 1.4 GB (3.4 GB here); at 1 MiB that is a few seconds and ~0.4 GB at worst. Hand-written training
#: code is far below it (the largest file of pytorch/examples is ~40 KB); files above it are generated.
MAX_PYTHON_BYTES = 1024 * 1024


def classify(path: Path) -> str | None:
    """``python`` | ``dockerfile`` | ``yaml`` | ``shell`` | ``requirements`` (pip's ``requirements*.txt``,
    ``*-requirements.txt``, ``*_requirements.txt``), or None for files that are not checked."""
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
    if lower.endswith(".txt") and (lower.startswith("requirements") or lower.endswith(("-requirements.txt",
                                                                                        "_requirements.txt"))):
        return "requirements"
    return None


def iter_files(roots: Iterable[str], skipped: list[str] | None = None) -> Iterator[tuple[str, str]]:
    """Yield ``(path, kind)`` for every checkable file under ``roots``, each real file once; a file
    inside a directory that is named like one but is no regular file (a FIFO, a device, a broken
    link or a symlink loop) is appended to ``skipped`` as ``path (what it is)``, for a note.

    Raises:
        UserError: a root does not exist (exit 2).
    """
    seen: set[str] = set()
    for root in roots:
        base = Path(root)
        if not base.exists():
            if os.path.lexists(base):
                raise UserError(f"{root}: a broken symbolic link or a symlink loop.", ExitCode.USAGE)
            raise UserError(f"{root}: no such file or directory.", ExitCode.USAGE)
        if not base.is_dir():
            # Named explicitly: a FIFO or device is yielded (never opened here, where it would block)
            # so that it is reported as not checked instead of silently skipped.
            kind = classify(base) or (_sniff(base) if base.is_file() else "unknown")
            if kind is None:
                raise UserError(f"{root}: not a Python file, Dockerfile, YAML manifest, shell script or requirements file.",
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
                        if skipped is not None:
                            skipped.append(f"{full} ({_not_regular(full)})")
                        continue
                    real = os.path.realpath(full)
                except OSError:
                    if skipped is not None:
                        skipped.append(f"{full} (cannot be read)")
                    continue
                if real in seen:
                    continue
                seen.add(real)
                yield str(full), kind


def _not_regular(path: Path) -> str:
    """What a directory entry that is no regular file is, in a few words."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symlink loop"
        return "a broken symbolic link" if os.path.islink(path) else f"cannot be read: {exc.strerror}"
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((name for test, name in kinds if test(mode)), "not a regular file")


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


def size_limit(kind: str) -> int:
    """The largest file of ``kind`` that is read: :data:`MAX_FILE_BYTES`, for Python :data:`MAX_PYTHON_BYTES`."""
    return min(MAX_FILE_BYTES, MAX_PYTHON_BYTES) if kind == "python" else MAX_FILE_BYTES


def read_bytes(path: str, kind: str = "") -> tuple[bytes | None, str]:
    """The file's bytes, or None and ``reason: detail`` (``too-large``, ``not-regular``, ``unreadable``,
    ``binary``) — never blocks on a FIFO or device and never reads past :func:`size_limit`."""
    try:
        data = read_regular_file(path, size_limit(kind))
    except InputFileError as exc:
        return None, f"{exc.reason}: {exc}"
    if b"\x00" in data[:8192]:
        return None, "binary: the file contains NUL bytes"
    return data, ""


def decoding_problem(data: bytes, kind: str) -> str:
    """``not-utf8: …`` when ``data`` cannot be decoded (Python files by their PEP 263 coding line), else ``""``."""
    if kind == "python":
        try:
            encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            data.decode(encoding)
        except UnicodeDecodeError as exc:
            return f"not-utf8: cannot decode as {encoding} at byte {exc.start}"
        except (SyntaxError, LookupError) as exc:
            return f"not-utf8: not UTF-8 and no valid coding line ({getattr(exc, 'msg', None) or exc})"
        return ""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not-utf8: cannot decode as UTF-8 at byte {exc.start}"
    return ""


def named_file_problem(path: str) -> str:
    """Why a file named on the command line cannot be analysed (``reason: detail``), or ``""``."""
    named = Path(path)
    kind = classify(named) or (_sniff(named) if named.is_file() else None) or "unknown"
    data, problem = read_bytes(path, kind)
    return problem if data is None else decoding_problem(data, kind)


#: Files judged as tests, not training jobs (``[tool.gpudoctor] test-files`` replaces the list): a
#: pattern with a ``/`` is matched against every trailing part of the file's path inside its project
#: (``tests/*`` matches any file under a ``tests`` directory at any depth), one without against the
#: file name.
DEFAULT_TEST_FILES = ("tests/*", "test/*", "testing/*", "test_*/*", "test_*.py", "*_test.py", "conftest.py")
#: What marks the top directory of a project: paths are matched from there, so that a project kept
#: under someone's ``~/tests/`` is not all tests.
_PROJECT_MARKERS = (".git", "pyproject.toml", "setup.py", "setup.cfg")


@functools.lru_cache(maxsize=4096)
def _project_root(directory: str) -> str | None:
    here = directory
    while True:
        if any(os.path.exists(os.path.join(here, marker)) for marker in _PROJECT_MARKERS):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def is_test_file(path: str, patterns: tuple[str, ...] = DEFAULT_TEST_FILES) -> bool:
    """Whether ``path`` is a test by ``patterns`` (see :data:`DEFAULT_TEST_FILES`), matched on its path
    inside its project (the nearest directory above it with ``.git``, ``pyproject.toml``, ``setup.py``
    or ``setup.cfg``; with none, on the file name alone)."""
    if not patterns:
        return False
    full = os.path.abspath(path)
    root = _project_root(os.path.dirname(full))
    inside = os.path.relpath(full, root) if root is not None else os.path.basename(full)
    parts = inside.replace(os.sep, "/").split("/")
    name = parts[-1]
    for pattern in patterns:
        if "/" not in pattern:
            if fnmatch.fnmatchcase(name, pattern):
                return True
            continue
        head = pattern.split("/", 1)[0]
        for start in range(len(parts) - 1):
            if fnmatch.fnmatchcase(parts[start], head) and fnmatch.fnmatchcase("/".join(parts[start:]), pattern):
                return True
    return False
