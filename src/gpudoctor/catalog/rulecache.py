"""A cache of parsed rule catalogs, keyed by the content of the rule files and the parsing code.

Why this exists: parsing the ~60 rule files (TOML front matter, ~250 condition and template
expressions checked node by node against the fact registry) took ~60 ms of every ``gpudoctor
analyze`` run — a tenth of the whole process on a 50 MB trace — and gives the same rules every time
the files are the same. The parsed rules are kept in one pickle per set of rule directories under the
user's cache directory (``$GPUDOCTOR_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpudoctor``, else
``~/.cache/gpudoctor``; ``GPUDOCTOR_NO_CACHE=1`` turns it off).

A stale cache can never give wrong rules: the key is a SHA-256 over every rule file's path and text
(the caller reads them all, as parsing would) and over the source of the modules that parse and
check them (the ``catalog`` package, ``model.py``, ``boundedio.py``) plus the Python version. Any
change to a rule or to that code is a miss, and a miss parses and checks everything as before. Only
a catalog that loaded without error is stored, so every error a rule file causes is still raised.

A pickle can run code when loaded, so the cache file (and its directory) is used only when it is a
regular file owned by this user and writable by no one else; anything else, or a file that does not
unpickle, is treated as a miss. Writing is atomic (a temporary file, then ``os.replace``); a cache
directory that cannot be written leaves the run uncached, never failed.

What it must not do: parse rules (the caller does), or let a cache problem become an error.
"""

from __future__ import annotations

import os
import pickle
import stat
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

try:  # hashlib's own BLAKE2; importing hashlib itself loads OpenSSL (~5 ms of every analyze run)
    from _blake2 import blake2b as _digest
except ImportError:  # an interpreter without it
    from hashlib import blake2b as _digest

#: Bump when the stored layout changes.
_FORMAT = b"gpudoctor-rule-cache-5"  # 2: Rule.symptom; 3: Rule and When are msgspec Structs; 4: Rule.gate; 5: When.id, When.no_case
_PACKAGE = Path(__file__).resolve().parent.parent


def cache_dir() -> Path | None:
    """Where cached catalogs live, or None when caching is turned off."""
    if os.environ.get("GPUDOCTOR_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("GPUDOCTOR_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "gpudoctor"


def _code_files() -> list[Path]:
    return sorted([*(_PACKAGE / "catalog").glob("*.py"), _PACKAGE / "model.py", _PACKAGE / "boundedio.py"])


def _read_code_state() -> bytes:
    """The parsing code's part of the key (the format, the Python version, the parsing modules' text)."""
    parts = [_FORMAT, sys.version.encode()]
    for code in _code_files():
        try:
            parts.append(str(code).encode() + b"\0" + code.read_bytes() + b"\0")
        except OSError:
            parts.append(b"missing\0")
    return b"".join(parts)


#: Read once, at import — with the code in memory, as it was loaded. Read on every call it would
#: describe the files on disk: a process started before they changed (a test suite, a long ``attach``
#: during an upgrade) would store what its old code parsed under the new code's key, and every later
#: run would load those rules (a new rule field read as its default).
_CODE_STATE = _read_code_state()


def catalog_key(files: Sequence[tuple[Path, str]]) -> bytes:
    """The digest of what decides the parsed rules: the rule files' paths and texts, the parsing code."""
    h = _digest(_CODE_STATE)
    for path, text in files:
        h.update(str(path).encode() + b"\0" + text.encode("utf-8", "surrogatepass") + b"\0")
    return h.digest()


def _cache_file(dirs: Sequence[Path]) -> Path | None:
    where = cache_dir()
    if where is None:
        return None
    name = _digest("\0".join(str(Path(d).resolve()) for d in dirs).encode()).hexdigest()[:20]
    return where / f"catalog-{name}.pickle"


def _trusted(path: Path) -> bool:
    """A regular file in a directory, both owned by this user and writable only by them."""
    getuid = getattr(os, "getuid", None)
    try:
        for p, want_reg in ((path.parent, False), (path, True)):
            st = os.stat(p, follow_symlinks=False)
            if want_reg and not stat.S_ISREG(st.st_mode):
                return False
            if getuid is not None and st.st_uid != getuid():
                return False
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
    except OSError:
        return False
    return True


def load_cached(dirs: Sequence[Path], key: bytes) -> dict[str, Any] | None:
    """The rules stored under ``key`` for these directories, or None (a miss, for any reason)."""
    path = _cache_file(dirs)
    if path is None or not _trusted(path):
        return None
    try:
        with open(path, "rb") as fh:
            stored_key, rules = pickle.load(fh)
    except Exception:  # a truncated, foreign or outdated file is a miss
        return None
    if stored_key != key or not isinstance(rules, dict):
        return None
    return rules


def store(dirs: Sequence[Path], key: bytes, rules: dict[str, Any]) -> None:
    """Store the parsed rules under ``key``; silently does nothing when that is not possible."""
    path = _cache_file(dirs)
    if path is None:
        return
    import tempfile  # only on a miss

    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".catalog-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump((key, rules), fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except Exception:  # a read-only home or an unpicklable rule: run uncached
        return
