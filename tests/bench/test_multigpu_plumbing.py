"""The multi-GPU validation's plumbing, on the CPU: the job under torchrun (gloo) and the tables.

``bench/validation/dist_job.py`` runs 2 real gloo ranks here with its tiny CPU model; the GPU run (NCCL,
2×H200) is the lead's. ``bench/validation/multigpu_validation.py``'s verdict/table/markdown functions are
fed canned reports in the shape ``gpudoctor … --format json`` prints.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
JOB = REPO / "bench" / "validation" / "dist_job.py"
TORCHRUN = Path(sys.executable).parent / "torchrun"


def _load_validation() -> Any:
    spec = importlib.util.spec_from_file_location("multigpu_validation", REPO / "bench/validation/multigpu_validation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mv = _load_validation()


def _run_job(out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("torch")
    if not TORCHRUN.exists():
        pytest.skip("torchrun is not installed next to this Python")
    cmd = [str(TORCHRUN), "--standalone", "--nproc-per-node", "2", str(JOB), "--device", "cpu", "--backend", "gloo",
           "--out", str(out), *extra]
    proc = subprocess.Popen(cmd, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        stdout, _ = proc.communicate(timeout=120)
    finally:
        mv.kill_tree(proc)
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, "")


def _leftovers(marker: str) -> list[int]:
    import psutil

    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if marker in " ".join(p.info["cmdline"] or []):
                found.append(p.pid)
    return found


@pytest.mark.slow
def test_ddp_job_writes_a_row_per_step_and_slows_rank_1(tmp_path: Path) -> None:
    done = _run_job(tmp_path, "--strategy", "ddp", "--mode", "compute", "--steps", "10", "--calib-steps", "4")
    assert done.returncode == 0, done.stdout[-2000:]
    rows = mv.read_rows(tmp_path)
    assert [len(rows[0]), len(rows[1])] == [10, 10]
    assert [r["step"] for r in rows[1]] == list(range(1, 11))
    assert all(r["step_ms"] > 0 and r["data_wait_ms"] >= 0 and r["pid"] for rr in rows.values() for r in rr)
    meta1 = json.loads((tmp_path / "rank1.meta.json").read_text())
    assert meta1["wrapper"] == "DistributedDataParallel" and meta1["extra_matmuls"] >= 1
    assert [r["slow"] for r in rows[1]][4:] == [False] + [True] * 5  # slowdown on after calibration
    assert not any(r["slow"] for r in rows[0])
    assert _leftovers(str(tmp_path)) == []


@pytest.mark.slow
def test_fsdp_job_profiles_every_rank_and_gpudoctor_reads_the_traces(tmp_path: Path) -> None:
    prof = tmp_path / "prof"
    done = _run_job(tmp_path, "--strategy", "fsdp", "--mode", "input", "--steps", "10", "--calib-steps", "4",
                    "--profile-dir", str(prof), "--profile-steps", "3:6")
    assert done.returncode == 0, done.stdout[-2000:]
    meta1 = json.loads((tmp_path / "rank1.meta.json").read_text())
    assert "FSDP" in meta1["wrapper"] and meta1["sample_delay_ms"] > 0
    assert sorted(p.name for p in prof.iterdir()) == ["rank0.pt.trace.json.gz", "rank1.pt.trace.json.gz"]
    analyzed = subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", str(prof), "--format", "json"],
                              capture_output=True, text=True, timeout=120)
    report = json.loads(analyzed.stdout)
    assert sorted(r["rank"] for r in report["ranks"]) == [0, 1]
    assert all(r["step_count"] == 3 for r in report["ranks"]), [r.get("step_count") for r in report["ranks"]]
    assert _leftovers(str(tmp_path)) == []


GD601 = {"code": "GD601", "location": {"rank": 1, "pid": 4242},
         "message": "rank 1 is a straggler (input): 93.7 ms/step outside collective waits vs 26.4 ms on the fastest "
                    "ranks (score 0.28 < 0.75 for 3 windows; …); data wait 70% of its step"}
RANKS_TABLE = {"title": "Ranks", "key": "ranks", "columns": ["rank", "step_time_ms", "straggler_score", "cause"],
               "rows": [{"rank": 0, "step_time_ms": 93.1, "collective_wait_pct": 70.2, "straggler_score": 1.0,
                         "status": "ok", "cause": None},
                        {"rank": 1, "step_time_ms": 93.4, "collective_wait_pct": 0.4, "straggler_score": 0.28,
                         "status": "straggler", "cause": "input"}]}


def _report(*findings: dict[str, Any]) -> dict[str, Any]:
    return {"command": "attach", "findings": list(findings), "tables": [RANKS_TABLE], "agent": {"status": "off"}}


def test_summary_and_verdicts_from_canned_reports() -> None:
    s = mv.summarize_report(_report(GD601, {"code": "GD703", "location": {}, "message": "x"}))
    assert s["rank_findings"][0] | {"message": ""} == {"code": "GD601", "rank": 1, "cause": "input", "message": ""}
    assert s["other"] == ["GD703"] and s["ranks_table"][1]["cause"] == "input"
    assert mv.verdict("input", s["rank_findings"]) == "ok"
    assert mv.verdict("compute", s["rank_findings"]) == "rank ok, cause input"
    assert mv.verdict("healthy", s["rank_findings"]) == "false positive"
    assert mv.verdict("healthy", []) == "ok" and mv.verdict("compute", []) == "missed"
    assert mv.verdict("healthy", [], RANKS_TABLE["rows"]) == "ok"
    assert mv.verdict("healthy", [], []).startswith("not judged")  # the session saw no ranks: no verdict
    wrong = dict(GD601, location={"rank": 0})
    assert mv.verdict("input", mv.summarize_report(_report(wrong))["rank_findings"]) == "wrong rank"


def test_overhead_compares_each_attached_window_with_its_neighbours() -> None:
    rates = [("alone", 10.0, 8.0), ("attached", 9.9, 8.5), ("alone", 10.0, 8.0), ("attached", 10.0, 8.4),
             ("alone", 10.0, 8.0)]
    ov = mv.overhead_summary(rates)
    assert ov["attached_pct"] == pytest.approx(99.5)
    assert ov["alone_steps_per_s"] == 10.0 and len(ov["windows"]) == 5
    assert mv.steps_per_s([{"t": 1.0}, {"t": 1.5}, {"t": 2.5}], 1.0, 2.0) == 2.0


def test_tables_show_every_scenario_and_the_errors() -> None:
    ok = {"strategy": "ddp", "mode": "input", "way": "attach", **mv.summarize_report(_report(GD601)),
          "verdict": "ok", "job": {0: {"step_ms": 93.1, "data_wait_ms": 0.2}, 1: {"step_ms": 93.4, "data_wait_ms": 66.0}},
          "job_alive_after": True}
    skipped = {"strategy": "fsdp", "mode": "compute", "way": "run", "error": "skipped: time budget spent"}
    extra = {"analyze": {"ddp": {"findings": ["GD602"], "ranks": [{"rank": 0, "overlap_pct": 41.5, "comm_pct": 12.0,
                                                                   "comm_kernel_share_pct": 14.2, "idle_pct": 3.0,
                                                                   "step_time_p50_ms": 30.1}]}},
             "overhead": mv.overhead_summary([("alone", 10.0, 8.0), ("attached", 10.0, 8.0), ("alone", 10.0, 8.0)]),
             "agent_baseline": {"no_agent_steps_per_s": 10.1, "agent_unwatched_steps_per_s": 10.0, "agent_pct": 99.01}}
    text = mv.text_table([ok, skipped])
    assert "GD601 rank 1 (input)" in text and "93.1 / 93.4" in text and "skipped: time budget spent" in text
    md = mv.markdown([ok, skipped], extra, {"gpus": ["NVIDIA H200", "NVIDIA H200"], "python": "3.12"})
    lines = md.splitlines()
    assert lines[0].startswith("Machine: NVIDIA H200, NVIDIA H200")
    assert any(line.startswith("| ddp | input | `attach <torchrun pid>` | rank 1 (input) | GD601 rank 1 (input) | ok")
               for line in lines)
    assert any(line.startswith("| fsdp | compute | `run -- torchrun …` | rank 1 (compute) | error: skipped") for line in lines)
    assert "r1: 93.4 ms, coll 0.4%, score 0.28, straggler (input)" in md
    assert "| ddp | 0 | 41.5 | 12 | 14.2 | 3 | 30.1 | GD602 |" in md
    assert "**100.0%** of unattached throughput" in md
    assert "without it: 10 vs 10.1 steps/s → 99.01%." in md


def test_kill_tree_kills_children_in_their_own_sessions(tmp_path: Path) -> None:
    """Like torchrun's ranks: a grandchild in a new session survives killpg but not kill_tree."""
    marker = f"sleep-marker-{os.getpid()}"
    script = ("import subprocess, sys, time\n"
              f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)', '{marker}'], "
              "start_new_session=True)\ntime.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, marker], start_new_session=True)
    import psutil

    deadline = 50
    while deadline and len(psutil.Process(proc.pid).children()) < 1:
        deadline -= 1
        subprocess.run(["sleep", "0.1"], check=True)
    assert len(_leftovers(marker)) == 2
    mv.kill_tree(proc)
    for _ in range(50):
        if not _leftovers(marker):
            break
        subprocess.run(["sleep", "0.1"], check=True)
    assert _leftovers(marker) == []
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGKILL)


def _load_hta_overlap() -> Any:
    spec = importlib.util.spec_from_file_location("hta_rank_overlap", REPO / "bench/perf/hta_rank_overlap.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_section_is_appended_once_then_replaced(tmp_path: Path) -> None:
    hro = _load_hta_overlap()
    docs = tmp_path / "validation.md"
    docs.write_text("# top, regenerated by someone else\n\n| a | b |\n")
    (tmp_path / "multigpu.md").write_text("| strategy | mode |\n|---|---|\n| ddp | input |\n")
    row = {"trace": "ddp/rank0", "rank": 0, **{k: {"gpudoctor": 41.0, "hta": 41.0, "diff_pts": 0.0}
                                               for k, _ in hro.METRICS}}
    hro.update_docs(hro.docs_section(tmp_path, [row], 0.0), docs)
    hro.update_docs(hro.docs_section(tmp_path, [row, dict(row, rank=1)], 0.0), docs)
    text = docs.read_text()
    assert text.startswith("# top, regenerated by someone else\n\n| a | b |\n")
    assert text.count(hro.START) == 1 and text.count(hro.END) == 1 and text.rstrip().endswith(hro.END)
    assert "| ddp | input |" in text and "| ddp/rank0 | 1 | 41.00 / 41.00 (0.00)" in text
