"""Reading a user's input file without trusting it: regular files only, never more than a size cap.

A rule directory, a configuration file or a path given to ``check`` can be anything the file system
holds: a FIFO (``open`` blocks until a writer comes, so ``check`` hung), a symlink to ``/dev/zero``
(``read`` never ends), a directory, or a file of gigabytes. Every such input is opened here
non-blocking, checked with ``fstat`` to be a regular file, and read up to its cap — the answer is the
bytes or one :class:`InputFileError` whose message is a sentence fragment naming the problem.

TOML parsing is bounded here too: Python's ``tomllib`` recurses once per nesting level and refuses
integers of more than 4300 digits with a ``ValueError``; both become a :class:`InputFileError`.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class InputFileError(ValueError):
    """An input file that cannot be used; ``reason`` is a short tag, the message says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason  # not-regular | too-large | unreadable | not-utf8 | malformed


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular_file(path: str | Path, max_bytes: int) -> bytes:
    """The bytes of ``path`` (symlinks followed), which must be a regular file of at most ``max_bytes``.

    Raises:
        InputFileError: not a regular file, larger than ``max_bytes``, or the system refused to read it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputFileError("unreadable", f"cannot be read ({exc.strerror or exc})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError("not-regular", f"is {_kind(info.st_mode)}, not a regular file")
        if info.st_size > max_bytes:
            raise InputFileError("too-large", f"is {_size(info.st_size)}, above the limit of {_size(max_bytes)}")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:  # grew while being read
            raise InputFileError("too-large", f"is larger than the limit of {_size(max_bytes)}")
        return b"".join(chunks)
    except OSError as exc:
        raise InputFileError("unreadable", f"cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_regular_text(path: str | Path, max_bytes: int) -> str:
    """:func:`read_regular_file`, decoded as UTF-8."""
    data = read_regular_file(path, max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError("not-utf8", f"is not UTF-8 text (undecodable byte at offset {exc.start})") from None


def loads_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads`` whose every failure, nesting and huge integers included, is an InputFileError.

    tomllib is imported here, not at the top: ``analyze`` reads the parsed rules from the rule cache
    and parses no TOML at all when no config file is found (~4 ms of start-up).
    """
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError("malformed", f"is not valid TOML ({exc})") from None
    except RecursionError:
        raise InputFileError("malformed", "is nested too deeply to be read as TOML") from None
    except (ValueError, MemoryError) as exc:  # e.g. an integer of more than 4300 digits
        raise InputFileError("malformed", f"holds a value that cannot be read ({str(exc).split(';')[0]})") from None


def _size(n: int) -> str:
    return f"{n / 1048576:.1f} MiB" if n >= 1048576 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"
