"""The GPU-time table (trace/gputime.py): pure and numpy paths bit-identical on every shared trace,
and each scope's rows what a direct walk over the events adds up."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.trace import gputime, vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import K_KERNEL, EventTable
from gpudoctor.trace.reader import load_trace
from gpudoctor.trace.timeline import plausible_steps, step_spans

TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"

pytest.importorskip("numpy")

_FILES = sorted(p for p in TRACES.rglob("*.json.gz")) if TRACES.exists() else []


def _table(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> tuple[gputime.GpuTime, Context, EventTable]:
    monkeypatch.setenv(vectorized.MODE_ENV, mode)
    t = load_trace(str(path), 0).events
    ctx = Context(t, plausible_steps(step_spans(t))[0])
    return gputime.gpu_time(t, ctx), ctx, t


@pytest.mark.skipif(not _FILES, reason=f"shared traces not found under {TRACES}")
@pytest.mark.parametrize("path", _FILES, ids=lambda p: str(p.relative_to(TRACES)))
def test_numpy_table_is_the_pure_table(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        pure, _, _ = _table(path, "never", monkeypatch)
    except Exception as exc:  # a trace the reader refuses is refused both ways
        with pytest.raises(type(exc)):
            _table(path, "always", monkeypatch)
        return
    fast, _, _ = _table(path, "always", monkeypatch)
    for scope in gputime.SCOPES:
        assert list(fast.rows(scope).items()) == list(pure.rows(scope).items()), scope  # bit-identical, same order
        assert fast.count(scope, lambda kind, c: True) == pure.count(scope, lambda kind, c: True)


@pytest.mark.skipif(not _FILES, reason=f"shared traces not found under {TRACES}")
def test_scopes_are_what_a_walk_over_the_events_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    path = TRACES / "h200" / "resnet_bf16.json.gz"
    if not path.exists():
        pytest.skip(f"{path} absent")
    table, ctx, t = _table(path, "never", monkeypatch)
    launched = ctx.device_steps(t)
    assert ctx.steps and launched
    kernels = [i for i in ctx.device if t.kind[i] == K_KERNEL]
    assert table.us(gputime.DEVICE, lambda kind, c: kind == K_KERNEL) == pytest.approx(sum(t.dur[i] for i in kernels))
    assert table.count(gputime.LAUNCHED, lambda kind, c: True) == len(launched)
    fusible = table.count(gputime.FUSIBLE, lambda kind, c: True)
    assert 0 < fusible <= sum(1 for i in launched if t.kind[i] == K_KERNEL
                              and table.classes[t.name[i]].fusion is not None)
    assert table.count(gputime.FUSIBLE, lambda kind, c: c.fusion is None) == 0
    lo, hi = ctx.steps[0][1], ctx.steps[-1][2]
    in_window = [i for i in ctx.device if t.dur[i] > 0 and t.ts[i] + t.dur[i] > lo and t.ts[i] < hi]
    assert table.count(gputime.WINDOW, lambda kind, c: True) == len(in_window)
    assert table.count(gputime.WINDOW_LAUNCHED, lambda kind, c: True) == sum(1 for i in in_window if i in launched)
