"""Shared helpers for the static-check tests: run the real checker + rule catalog in process."""

from __future__ import annotations

from pathlib import Path

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import Finding, Source
from gpudoctor.static.runner import run_checks
from gpudoctor.static.sites import is_ignored

DATA = Path(__file__).resolve().parents[1] / "data" / "static"
GOLDEN = DATA / "golden"
REPO = Path(__file__).resolve().parents[2]


def check_findings(paths: list[Path], jobs: int = 1, test_files: tuple[str, ...] = ()) -> list[Finding]:
    """Findings of `gpudoctor check` on ``paths`` (built-in catalog, inline ignores applied). The fixtures
    live under tests/, so by default no file is taken for a test (``test_files`` as the user's
    ``[tool.gpudoctor] test-files = []``); pass :data:`DEFAULT_TEST_FILES` to judge as ``check`` does."""
    run = run_checks([str(p) for p in paths], jobs=jobs, test_files=test_files)
    result = evaluate(load_catalog(), run.factsets, [Source.STATIC])
    assert not result.errors, result.errors
    return [f for f in result.findings
            if not is_ignored(f.code, f.location.line, run.ignores.get(f.location.path or "", {}))]


def golden_lines(findings: list[Finding], path: Path) -> list[str]:
    """``line:col CODE message`` for the findings in ``path``, in file order."""
    mine = [f for f in findings if f.location.path == str(path)]
    mine.sort(key=lambda f: (f.location.line or 0, f.location.col or 0, f.code))
    return [f"{f.location.line}:{f.location.col} {f.code} {f.message}" for f in mine]


