"""bench/validation/graph_break_probe.py plants the breaks it says, and its traces show them to GD401.

The probe runs for real on this machine's CPU (``--cpu --tiny``: torch.compile with Inductor's C++
backend, a few steps), in a subprocess as on the GPU machine; its traces are then read by
gpudoctor's own pipeline: K planted breaks must give K + 1 graphs per call and 2·K windows per step
(K forward, K backward).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

PROBE = Path(__file__).resolve().parents[2] / "bench" / "validation" / "graph_break_probe.py"


def _probe(*args: str, timeout: float = 600.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(PROBE), *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def test_planted_breaks_reach_the_trace(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done = _probe("--cpu", "--tiny", "--sizes", "launch", "--breaks", "0,2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((tmp_path / "probe.json").read_text())
    rows = {r["variant"]: r for r in meta["variants"]}
    assert set(rows) == {"launch_k0", "launch_k2"} and meta["skipped"] == []
    assert rows["launch_k0"]["speedup_k0_over_k"] == 1.0
    assert "launch_k2" in done.stdout and "K=0 / K" in done.stdout  # the table
    for breaks in (0, 2):
        values = compute_rank_metrics(load_trace(tmp_path / rows[f"launch_k{breaks}"]["trace"])).values
        assert rows[f"launch_k{breaks}"]["graphs_compiled"] == breaks + 1
        assert values["compiled_graphs_per_call"] == breaks + 1
        assert values["graph_break_windows_per_step"] == 2 * breaks
        assert values["graph_break_backward_windows_per_step"] == breaks


def test_a_spent_budget_skips_variants_cleanly(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    done = _probe("--cpu", "--tiny", "--sizes", "launch", "--breaks", "0", "--budget-s", "-1", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    meta = json.loads((tmp_path / "probe.json").read_text())
    assert meta["variants"] == [] and meta["skipped"] == ["launch_k0"]


@pytest.mark.parametrize("args", [["--breaks", "12"], ["--breaks", "x"], ["--sizes", "huge"]])
def test_bad_arguments_end_in_one_sentence(tmp_path: Path, args: list[str]) -> None:
    pytest.importorskip("torch")
    done = _probe("--cpu", "--tiny", *args, "--out", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr.startswith("graph_break_probe: ") and "Traceback" not in done.stderr
