"""A directory of rank traces analysed on several processes gives exactly the serial result."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def test_parallel_ranks_match_serial(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    paths = write_rank_set(trace_file("h200/compile_break.json.gz"), tmp_path / "ranks", ranks=4, gzip_level=1,
                           slow_rank=2)
    serial = analyze_paths([tmp_path / "ranks"], jobs=1)
    parallel = analyze_paths([tmp_path / "ranks"], jobs=3)
    assert len(paths) == 4 and sorted(r["rank"] for r in serial.data["ranks"]) == [0, 1, 2, 3]
    assert _comparable(serial) == _comparable(parallel)
    stragglers = {row["rank"]: row for row in next(t for t in serial.tables if t.key == "stragglers").rows}
    assert min(stragglers, key=lambda r: stragglers[r]["step_time_score"] or 9) == 2  # the stretched rank


def test_bad_jobs_value_is_a_usage_error(trace_file: Callable[[str], Path]) -> None:
    import pytest

    from gpudoctor.exitcodes import UserError

    with pytest.raises(UserError, match="--jobs"):
        analyze_paths([trace_file("h200/compile_break.json.gz")], jobs=0)
