"""Analyse a live session's profile traces in a separate, niced process.

Why this exists: parsing a profile trace (hundreds of thousands of events) holds the GIL for up to
half a second at a time; done in the dashboard's own process it froze key handling (measured: GIL
pauses of 418 ms on a 216k-event trace). A child process parses instead, at the observers' low
priority, and sends back only the report. The child is a fresh interpreter
(``python -m gpudoctor.live.profileanalysis``) fed a pickle on stdin — not a multiprocessing child,
which would re-run the parent's ``__main__`` and hang the parent when that cannot be done (a REPL,
``python -``). It is started like py-spy (:func:`~gpudoctor.live.priority.observer_child_setup`):
niced, and killed by the kernel when gpudoctor dies, so a dashboard closed mid-analysis leaves no
process behind. If no child can be started, the analysis runs here.

What it must not do: run a forked copy of the (threaded) dashboard process, wait without a bound, or raise: every
failure becomes one sentence for the session's notes.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from gpudoctor.catalog import Catalog
from gpudoctor.isolated import python_m
from gpudoctor.live.priority import observer_child_setup

#: A trace that takes longer than this to analyse is given up (the child is killed).
ANALYSIS_TIMEOUT_S = 180.0


def _analyze(paths: Sequence[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]],
             context: Mapping[str, Any] | None = None) -> Any:
    from gpudoctor.pipeline import analyze_paths

    return analyze_paths(list(paths), catalog=catalog, options=options, context=context)


def analyze_profile_traces(paths: Sequence[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]],
                           timeout_s: float = ANALYSIS_TIMEOUT_S,
                           context: Mapping[str, Any] | None = None) -> tuple[Any, str | None]:
    """``(report, None)`` on success, ``(None, why)`` when the traces could not be analysed.
    ``context``: the job's live facts the traces cannot show (``pipeline.analyze_paths``)."""
    request = pickle.dumps((list(paths), catalog, dict(options), dict(context or {})))
    try:
        done = subprocess.run(python_m("gpudoctor.live.profileanalysis"), input=request,
                              capture_output=True, timeout=timeout_s, check=False,
                              preexec_fn=observer_child_setup())   # niced; killed if gpudoctor dies
    except subprocess.TimeoutExpired:
        return None, f"the analysis took longer than {timeout_s:.0f} s and was stopped"
    except OSError:  # no child process possible here: analyse in this process
        try:
            return _analyze(paths, catalog, options, context), None
        except Exception as exc:
            return None, str(exc) or type(exc).__name__
    try:
        status, payload = pickle.loads(done.stdout)
    except Exception:
        tail = (done.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        return None, f"the analysis process ended without a result ({tail[:200]})"
    return (payload, None) if status == "ok" else (None, payload)


def _child_main() -> int:
    """The child: read the request pickle from stdin, write ``(status, report or sentence)`` to stdout."""
    out = sys.stdout.buffer
    try:
        paths, catalog, options, context = pickle.loads(sys.stdin.buffer.read())
        result: tuple[str, Any] = ("ok", _analyze(paths, catalog, options, context))
    except BaseException as exc:  # everything goes back as one sentence
        result = ("error", str(exc) or type(exc).__name__)
    out.write(pickle.dumps(result))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
