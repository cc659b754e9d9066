"""The straggler tracker on per-rank numbers measured on 2×H200 (NCCL, DDP): the Ranks tables of the
three bench/validation/multigpu_validation.py runs in tests/data/gpu_runs/. Each table is the agents' last window;
fed to the tracker for 3 windows (steady state) it must name the slow rank with the right cause and
leave the healthy runs alone — including the +50% compute straggler whose score (0.69–0.79) sits at
the threshold, caught by the waited-on signal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.live.stragglers import RankWindow, StragglerTracker

RESULTS = Path(__file__).resolve().parents[2] / "tests" / "data" / "gpu_runs"
RUNS = ["h200x2-multigpu-run1", "h200x2-multigpu-run2", "h200x2-multigpu-run3"]
EXPECTED = {"healthy": None, "compute": (1, "compute"), "input": (1, "input")}


def _cases() -> list[tuple[str, str, list[dict]]]:
    cases = []
    for run in RUNS:
        path = RESULTS / run / "multigpu.json"
        if not path.exists():
            continue
        for r in json.loads(path.read_text())["results"]:
            if r["strategy"] == "ddp" and r.get("ranks_table"):
                cases.append((run, r["mode"], r["ranks_table"]))
    return cases


def _window(row: dict) -> RankWindow:
    step = row["step_time_ms"]
    return RankWindow(rank=row["rank"], pid=row["pid"], steps_total=row["steps_total"], window_steps=40,
                      step_time_ms=step, data_wait_ms=row["data_wait_pct"] * step / 100.0,
                      collective_wait_ms=row["collective_wait_pct"] * step / 100.0,
                      gpu_util_pct=row.get("gpu_util_pct"))


CASES = _cases()


@pytest.mark.skipif(not CASES, reason="tests/data/gpu_runs/h200x2-multigpu-run* not here")
@pytest.mark.parametrize(("run", "mode", "table"), CASES, ids=[f"{c[0][-4:]}-{c[1]}" for c in CASES])
def test_measured_h200_windows(run: str, mode: str, table: list[dict]) -> None:
    tracker = StragglerTracker()
    report = None
    for i in range(3):
        report = tracker.update([_window(row) for row in table], float(i))
    assert report is not None
    named = [(v.rank, v.cause) for v in report.stragglers]
    expected = EXPECTED[mode]
    assert named == ([] if expected is None else [expected]), (run, mode, report.verdicts)
