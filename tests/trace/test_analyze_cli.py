"""``gpudoctor analyze`` end to end, as a user runs it: formats, output file, exit codes, no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    return subprocess.run([sys.executable, "-m", "gpudoctor", "analyze", *map(str, args)],
                          capture_output=True, text=True, timeout=120, cwd=REPO, env=env)


def test_text_report_and_exit_1_on_findings(trace_file: Callable[[str], Path]) -> None:
    proc = _run(trace_file("h200/loader_bound.json.gz"))
    assert proc.returncode == 1, proc.stderr
    assert "GD102" in proc.stdout and "input-bound" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_json_has_per_rank_metrics_and_findings(trace_file: Callable[[str], Path]) -> None:
    proc = _run(trace_file("public/hta/trace_filter"), "--format", "json", "--per-step")
    data = json.loads(proc.stdout)
    assert data["command"] == "analyze"
    ranks = {r["rank"]: r for r in data["ranks"]}
    assert set(ranks) == {0, 1}
    assert abs(ranks[0]["idle_pct"] - 53.56) < 0.5 and abs(ranks[1]["compute_pct"] - 22.57) < 0.5
    assert all(r["step_ms"] for r in data["ranks"])
    assert any(t["key"] == "steps" and t["rows"] for t in data["tables"])


def test_fail_on_critical_and_output_file(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    out = tmp_path / "report.md"
    proc = _run(trace_file("public/hta/ns_resolution_trace"), "--format", "markdown", "-o", out, "--fail-on", "critical")
    assert proc.returncode == 0, proc.stderr  # only warnings there (a V100: no measured ratios, declared severities)
    assert "GD201" in out.read_text()
    assert proc.stdout == ""


def test_ignore_leaves_nothing(trace_file: Callable[[str], Path]) -> None:
    proc = _run(trace_file("h200/resnet_fp32.json.gz"), "--ignore", "GD2,GD403")  # precision, compile
    assert proc.returncode == 0, proc.stdout


def test_bad_inputs_exit_2_with_one_sentence(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    truncated = tmp_path / "cut.json.gz"
    data = trace_file("h200/resnet_fp32.json.gz").read_bytes()
    truncated.write_bytes(data[:5000])
    foreign = tmp_path / "other.json"
    foreign.write_text('{"hello": "world"}')
    garbage = tmp_path / "garbage.json"
    garbage.write_text("<html>not json</html>")
    for path in (truncated, foreign, garbage, tmp_path / "missing.json"):
        proc = _run(path)
        assert proc.returncode == 2, (path, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpudoctor: "), proc.stderr
        assert "Traceback" not in proc.stderr


def test_tui_without_terminal_prints_the_report(trace_file: Callable[[str], Path]) -> None:
    proc = _run(trace_file("h200/resnet_bf16.json.gz"), "--tui")
    assert "GD203" in proc.stdout
    assert "not a terminal" in proc.stderr


def test_analyze_never_imports_torch(trace_file: Callable[[str], Path]) -> None:
    code = ("import sys; from gpudoctor.cli import main; rc = main(['analyze', '--format', 'json', '-o', "
            f"'/dev/null', {str(trace_file('h200/compile_break.json.gz'))!r}]); "
            "bad = [m for m in ('torch', 'pandas', 'textual') if m in sys.modules]; "
            "print(rc, bad); sys.exit(0 if rc == 1 and not bad else 9)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text in (entry / "cmdline").read_bytes().decode("utf-8", "replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_rank_workers_match_serial_and_end_with_a_config_error(tmp_path: Path,
                                                               trace_file: Callable[[str], Path]) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    from trace_synth import write_rank_set

    ranks = tmp_path / "ranks"
    write_rank_set(trace_file("h200/loader_bound.json.gz"), ranks, ranks=4, gzip_level=1)
    serial, parallel = _run(ranks, "--format", "json", "--jobs", "1"), _run(ranks, "--format", "json", "--jobs", "2")
    assert parallel.returncode == serial.returncode == 1, parallel.stderr
    docs = [json.loads(p.stdout) for p in (serial, parallel)]
    for doc in docs:
        doc.pop("elapsed_s")
        for finding in doc["findings"]:
            finding.pop("timestamp", None)
    assert docs[0] == docs[1] and len(docs[0]["ranks"]) == 4
    # the workers start before the config is read: a bad config still ends in one sentence, and no
    # worker outlives the command
    bad = tmp_path / "gpudoctor.toml"
    bad.write_text("[tool.gpudoctor\nselect = 3\n")
    proc = _run(ranks, "--jobs", "2", "--config", bad)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("gpudoctor: "), proc.stderr
    assert _processes_mentioning(str(ranks)) == []
