"""Every shared trace's metrics, pure Python against numpy (``GPUDOCTOR_NUMPY=always``): the same values.

The numpy path serves only big tables (trace/vectorized.py), which no shared trace is; forcing it here is
what keeps the two paths from drifting apart. Floats may differ in their last bits where numpy forms a
sum in another order, so a float may differ by one unit of its last rounded digit; everything else
(counts, names, verdicts, which metric is None) must be equal.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.trace import vectorized
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

pytest.importorskip("numpy")

_FILES = sorted(p for p in TRACES.rglob("*.json*") if not p.name.endswith(".result.json")) if TRACES.exists() else []


def _metrics(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    monkeypatch.setenv(vectorized.MODE_ENV, mode)
    trace = load_trace(str(path), 0)
    m = compute_rank_metrics(trace)
    return m.values, m.step_rows


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and not isinstance(a, bool):
        return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0101)  # one unit of 2 decimals
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    return bool(a == b) and type(a) is type(b) or (isinstance(a, (int, float)) and isinstance(b, (int, float))
                                                    and not isinstance(a, bool) and a == b)


@pytest.mark.skipif(not _FILES, reason=f"shared traces not found under {TRACES}")
@pytest.mark.parametrize("path", _FILES, ids=lambda p: str(p.relative_to(TRACES)))
def test_numpy_path_gives_the_pure_paths_metrics(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        pure, pure_rows = _metrics(path, "never", monkeypatch)
    except Exception as exc:  # a trace the reader refuses (the bad-input traces) is refused both ways
        with pytest.raises(type(exc)):
            _metrics(path, "always", monkeypatch)
        return
    fast, fast_rows = _metrics(path, "always", monkeypatch)
    assert list(fast) == list(pure), "the same metrics, in the same order"
    differing = {k: (pure[k], fast[k]) for k in pure if not _close(pure[k], fast[k])}
    assert not differing
    assert _close(pure_rows, fast_rows)
