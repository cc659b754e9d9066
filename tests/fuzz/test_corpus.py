"""Every case of the bad-input corpus (tests/fuzz/corpus/*/manifest.toml) through the real CLI.

Properties, per case: the documented exit code of its manifest (never 70), at most one line on stderr
and no traceback, at most 5 s of CPU time, and a peak RSS of at most 200 MB (all corpus inputs are
tiny or made at run time). CPU time rather than wall time is asserted, so that a loaded machine cannot
fail the test; a case still running after GPUDOCTOR_CORPUS_WALL_S (30 s) of wall time is a hang and
fails. Cases run concurrently, one per core. ``make_table.py`` turns the same runs into
docs/bad-inputs.md.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest
from corpus_runner import DOCUMENTED_EXITS, Case, Outcome, load_cases, run_case

CASES = load_cases()
MAX_CPU_S = 5.0
MAX_RSS_MIB = 200.0


def test_every_folder_has_cases() -> None:
    folders = {case.folder for case in CASES}
    assert {"check", "rules", "config", "attach"} <= folders


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    """Every case run once, as many at a time as there are cores (each is one short subprocess)."""
    with ThreadPoolExecutor(max_workers=max(2, min(8, os.cpu_count() or 2))) as pool:
        return dict(zip([c.id for c in CASES], pool.map(run_case, CASES)))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case(case: Case, outcomes: dict[str, Outcome]) -> None:
    outcome = outcomes[case.id]
    assert outcome.code is not None, f"hung: killed after {outcome.wall_s:.0f} s"
    assert outcome.code in DOCUMENTED_EXITS and outcome.code != 70, outcome.stderr
    assert outcome.code == case.exit, f"{case.what}: exit {outcome.code}, expected {case.exit}: {outcome.stderr}"
    assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr
    assert outcome.stderr.count("\n") <= 1, outcome.stderr
    if outcome.stderr:
        assert outcome.stderr.startswith("gpudoctor: ")
    assert outcome.cpu_s <= MAX_CPU_S, f"{outcome.cpu_s:.1f} s of CPU"
    assert outcome.peak_rss_mib <= MAX_RSS_MIB, f"peak RSS {outcome.peak_rss_mib:.0f} MiB"
