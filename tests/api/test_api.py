"""The Python API (``gpudoctor.analyze`` / ``gpudoctor.check``) on real traces and the example files.

The API must hand back what the CLI prints — same findings, same per-rank numbers — and the README's
example must run as written.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpudoctor
from gpudoctor.api import TraceReport
from gpudoctor.exitcodes import UserError

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
LOADER = TRACES / "h200" / "loader_bound.json.gz"


@pytest.fixture(autouse=True)
def _real_traces() -> None:
    if not LOADER.exists():
        pytest.skip(f"real traces not found under {TRACES}")


def _cli_json(*args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", *args, "--format", "json"], capture_output=True,
                          text=True, timeout=300, cwd=REPO)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_analyze_returns_what_the_cli_prints() -> None:
    report = gpudoctor.analyze(LOADER)
    assert isinstance(report, TraceReport)
    cli = _cli_json("analyze", str(LOADER))
    assert report.codes() == [f["code"] for f in cli["findings"]]
    assert "GD102" in report.codes()
    gd102 = next(f for f in report.findings if f.code == "GD102")
    evidence = {e.name: e.value for e in gd102.evidence}
    assert evidence["dataloader_pct"] > 40  # the DataLoader takes most of the step on this trace
    assert gd102.fix.after and "num_workers" in gd102.fix.after
    cli_ranks_table = next(t for t in cli["tables"] if t["key"] == "ranks")
    assert report.table("ranks") == cli_ranks_table["rows"]
    assert report.table("ranks")[0]["idle_pct"] > 50
    assert report.ranks[0]["step_time_p50_ms"] == cli["ranks"][0]["step_time_p50_ms"] > 0
    assert report.bottlenecks and report.bottlenecks[0].bound == "input"
    assert report.to_dict()["findings"][0]["code"] == report.codes()[0]
    assert "GD102" in report.render("markdown")


def test_analyze_takes_options_and_a_directory_of_ranks() -> None:
    strict = gpudoctor.analyze([LOADER], config={"GD102": {"critical_dataloader_pct": 99.0,
                                                            "max_dataloader_pct": 99.0}})
    assert "GD102" not in strict.codes()  # the thresholds were applied
    pair = gpudoctor.analyze(TRACES / "public" / "hta" / "trace_filter", jobs=2)
    assert sorted(r["rank"] for r in pair.ranks) == [0, 1]
    assert {r["rank"] for r in pair.table("stragglers")} == {0, 1}


def test_to_pandas_needs_pandas_and_says_so() -> None:
    report = gpudoctor.analyze(LOADER)
    try:
        import pandas  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install pandas"):
            report.to_pandas("ranks")
        with pytest.raises(ImportError, match="plain lists"):
            report.ranks_frame()
        return
    frame = report.to_pandas("ranks")
    assert list(frame["rank"]) == [0] and frame["idle_pct"][0] == report.table("ranks")[0]["idle_pct"]


def test_bad_input_is_a_user_error() -> None:
    with pytest.raises(UserError, match="does not exist"):
        gpudoctor.analyze("/nonexistent/trace.json")
    with pytest.raises(KeyError, match="no table"):
        gpudoctor.analyze(LOADER).table("nope")


def test_check_matches_the_cli() -> None:
    target = REPO / "examples" / "check"
    report = gpudoctor.check([target])
    cli = _cli_json("check", str(target))
    assert sorted((f.code, f.location.line) for f in report.findings) == \
        sorted((f["code"], f["location"].get("line")) for f in cli["findings"])
    assert report.files_checked >= 4


def test_import_gpudoctor_stays_light() -> None:
    code = "import sys, gpudoctor; bad = [m for m in ('rich', 'textual', 'torch', 'pandas', 'gpudoctor.api') " \
           "if m in sys.modules]; print(bad)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_readme_python_api_example_runs() -> None:
    """The code block under README.md's "Python API" heading, executed as written from the repo root."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, "README.md's Python API section has no python code block"
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(REPO)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code.group(1), "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    printed = out.getvalue()
    assert "GD102" in printed and "input pipeline bounds the step" in printed
    assert re.search(r"\('GD\d{3}', \d+\)", printed.splitlines()[-1])  # check's (code, line) pairs
