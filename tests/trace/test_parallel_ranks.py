"""A directory of rank traces analysed on several processes gives exactly the serial result."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.pipeline import analyze_paths
from gpudoctor.report.render import to_dict

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from trace_synth import write_rank_set


def _comparable(report: Any) -> dict[str, Any]:
    doc = to_dict(report)
    doc.pop("elapsed_s", None)
    for finding in doc["findings"]:
        finding.pop("timestamp", None)
    return doc


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_parallel_ranks_match_serial(tmp_path: Path, trace_file: Callable[[str], Path], start: str,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.trace import analysis

    # fork: the CLI's own pool (a process with one thread); spawn: a notebook kernel's, with threads
    monkeypatch.setattr(analysis, "can_fork", lambda: start == "fork")
    paths = write_rank_set(trace_file("h200/compile_break.json.gz"), tmp_path / "ranks", ranks=4, gzip_level=1,
                           slow_rank=2)
    (tmp_path / "ranks" / "config.json").write_text('{"lr": 0.1}')  # not a trace: skipped, and said so
    (tmp_path / "ranks" / "rank-9.pt.trace.json.gz").write_bytes(b"\x1f\x8b\x08truncated")  # corrupt
    serial = analyze_paths([tmp_path / "ranks"], jobs=1)
    parallel = analyze_paths([tmp_path / "ranks"], jobs=3)
    assert any("config.json" in n for n in serial.notes) and any("rank-9" in n for n in serial.notes)
    assert len(paths) == 4 and sorted(r["rank"] for r in serial.data["ranks"]) == [0, 1, 2, 3]
    assert _comparable(serial) == _comparable(parallel)
    stragglers = {row["rank"]: row for row in next(t for t in serial.tables if t.key == "stragglers").rows}
    assert min(stragglers, key=lambda r: stragglers[r]["step_time_score"] or 9) == 2  # the stretched rank


def test_bad_jobs_value_is_a_usage_error(trace_file: Callable[[str], Path]) -> None:
    from gpudoctor.exitcodes import UserError

    with pytest.raises(UserError, match="--jobs"):
        analyze_paths([trace_file("h200/compile_break.json.gz")], jobs=0)
