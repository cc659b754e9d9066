"""The CLI surface shared by all commands: rules, explain, exit codes, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys

from gpudoctor.cli import main


def test_rules_json_lists_catalog(capsys) -> None:
    assert main(["rules", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    codes = [r["code"] for r in rules]
    assert "GD101" in codes and codes == sorted(codes)
    assert all({"code", "name", "severity", "sources", "fix", "explanation"} <= r.keys() for r in rules)


def test_rules_filter_by_source(capsys) -> None:
    assert main(["rules", "--source", "trace", "--format", "json"]) == 0
    rules = json.loads(capsys.readouterr().out)["rules"]
    assert rules and all("trace" in r["sources"] for r in rules)


def test_explain_by_code_and_name(capsys) -> None:
    assert main(["explain", "GD101", "--format", "markdown"]) == 0
    text = capsys.readouterr().out
    assert "## Why it is slow" in text and "max_idle_pct" in text
    assert main(["explain", "low-gpu-utilization", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["code"] == "GD101"


def test_explain_renders_markdown_at_the_terminals_width() -> None:
    """``explain GD201`` printed raw Markdown hard-wrapped at ~100 columns: now headings and paragraphs
    are drawn for the terminal and reflowed to its width (COLUMNS when stdout is a pipe)."""
    import os

    for width in (60, 140):
        proc = subprocess.run([sys.executable, "-m", "gpudoctor", "explain", "GD201"], capture_output=True, text=True,
                              env={**os.environ, "COLUMNS": str(width)})
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert "## What it detects" not in proc.stdout and any(line.strip() == "What it detects" for line in lines)
        assert max(len(line.rstrip()) for line in lines) <= width
        assert max(len(line.rstrip()) for line in lines) > min(width, 100) - 15   # paragraphs fill the width


def test_unknown_rule_is_one_sentence_exit_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpudoctor", "explain", "GD999"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_no_command_prints_help_and_exits_2() -> None:
    proc = subprocess.run([sys.executable, "-m", "gpudoctor"], capture_output=True, text=True)
    assert proc.returncode == 2 and "usage" in proc.stderr
