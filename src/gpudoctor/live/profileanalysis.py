"""Analyse a live session's profile traces in a separate, niced process.

Why this exists: parsing a profile trace (hundreds of thousands of events) holds the GIL for up to
half a second at a time; done in the dashboard's own process it froze key handling (measured: GIL
pauses of 418 ms on a 216k-event trace). A spawned child process parses instead, at the observers'
low priority, and sends back only the report. If a child cannot be started, the analysis runs here.

What it must not do: fork the (threaded) dashboard process, wait without a bound, or raise: every
failure becomes one sentence for the session's notes.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Mapping, Sequence
from typing import Any

from gpudoctor.catalog import Catalog
from gpudoctor.live.priority import nice_child

#: A trace that takes longer than this to analyse is given up (the child is killed).
ANALYSIS_TIMEOUT_S = 180.0


def _analyze(paths: Sequence[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]]) -> Any:
    from gpudoctor.trace.analysis import analyze_paths

    return analyze_paths(list(paths), catalog=catalog, options=options)


def _child(paths: Sequence[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]], conn: Any) -> None:
    nice_child()
    try:
        conn.send(("ok", _analyze(paths, catalog, options)))
    except BaseException as exc:
        conn.send(("error", str(exc) or type(exc).__name__))
    finally:
        conn.close()


def analyze_profile_traces(paths: Sequence[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]],
                           timeout_s: float = ANALYSIS_TIMEOUT_S) -> tuple[Any, str | None]:
    """``(report, None)`` on success, ``(None, why)`` when the traces could not be analysed."""
    try:
        ctx = multiprocessing.get_context("spawn")
        receiver, sender = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_child, args=(list(paths), catalog, dict(options), sender),
                            name="gpudoctor-trace-analysis", daemon=True)
        child.start()
    except Exception:  # no child process possible here: analyse in this process
        try:
            return _analyze(paths, catalog, options), None
        except Exception as exc:
            return None, str(exc) or type(exc).__name__
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            return None, f"the analysis took longer than {timeout_s:.0f} s and was stopped"
        status, payload = receiver.recv()
    except (EOFError, OSError):
        return None, f"the analysis process ended without a result (exit code {child.exitcode})"
    finally:
        if child.is_alive():
            child.join(timeout=5)
        if child.is_alive():
            child.kill()
            child.join(timeout=5)
        receiver.close()
    return (payload, None) if status == "ok" else (None, payload)
