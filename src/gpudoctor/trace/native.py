"""The C scanner of Kineto events (``_kineto.c``), when this install has it.

Why this exists: on a big trace the per-event Python of the msgspec path (a struct per event, then a
pass per column) is half the time; the C scanner fills the same columns straight from the JSON. It is
compiled when the wheel is built (``hatch_build.py``) and optional: without it, or with
``GPUDOCTOR_PURE=1`` in the environment, every chunk takes the msgspec path — same tables, slower.

What it must not do: decide anything. :func:`scan` returns None for any chunk the C code does not
handle exactly as the Python path would, and that path then decodes it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

Scan = Callable[[object, dict, dict, dict], "tuple[bytes, ...] | None"]


def _load() -> Scan | None:
    if os.environ.get("GPUDOCTOR_PURE"):
        return None
    try:
        from gpudoctor.trace._kineto import scan
    except ImportError:  # no compiler at install, Python < 3.11, or a wheel built pure
        return None
    return scan


#: ``scan(chunk, names, threads, code_by_cat)``: the chunk's 11 columns as bytes (kind codes, name
#: ids, thread ids, ts, dur, stream, correlation, bytes, memory ts/allocated/reserved), new names and
#: threads interned into the two dicts; or None, the dicts untouched. None when not built.
scan: Scan | None = _load()


def available() -> bool:
    """Whether traces are read by the C scanner in this process."""
    return scan is not None
