"""One rank numbering in a report: files skipped in a folder (a result.json beside the traces) do not count
in a note's rank while the cards and tables count only the traces (a note said "rank 3" of a card's "rank 1")."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

TRACE = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "h200" / "loader_bound.json.gz"


@pytest.mark.skipif(not TRACE.is_file(), reason="../shared/traces is not here")
def test_a_note_names_the_rank_the_cards_name(tmp_path: Path) -> None:
    from gpudoctor.pipeline import analyze_paths

    (tmp_path / "a_config.json").write_text('{"lr": 0.1}')
    (tmp_path / "b_result.json").write_text('{"steps_per_s": 3}')
    shutil.copy(TRACE, tmp_path / "c_loader.json.gz")
    report = analyze_paths([str(tmp_path)])
    assert {f.location.rank for f in report.findings} == {0}
    position = [n for n in report.notes if "taken from the position" in n]
    assert position == ["c_loader.json.gz: no distributedInfo; rank 0 taken from the position."], report.notes


SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is not here")
def test_no_message_of_the_shared_traces_has_a_missing_value() -> None:
    """``analyze ../shared/traces`` printed "slower than the other ranks in ? of ? profiled steps"."""
    from gpudoctor.pipeline import analyze_paths

    report = analyze_paths([str(SHARED)])
    holes = [f"{f.code}: {f.message}" for f in report.findings if "?" in f.message.replace("?)", ")")]
    assert holes == []


HTA = SHARED / "public" / "hta"


@pytest.mark.skipif(not HTA.is_dir(), reason="../shared/traces is not here")
def test_per_rank_tables_list_ranks_in_order_not_in_file_order() -> None:
    """A folder of unrelated traces printed its tables' rows as 0, 34, 35, 1, 4, 36, … (file order)."""
    from gpudoctor.pipeline import analyze_paths

    report = analyze_paths([str(HTA)])
    assert report.tables
    for table in report.tables:
        ranks = [row["rank"] for row in table.rows]
        assert ranks == sorted(ranks), (table.title, ranks)


@pytest.mark.skipif(not HTA.is_dir(), reason="../shared/traces is not here")
def test_the_report_says_why_the_verdicts_idle_share_and_the_tables_idle_pct_differ() -> None:
    """The verdict read "the GPU idles 100% of a 13336.3 ms step" on rank 14 while its table row said
    idle_pct 0 (HTA's idle is of the GPU's busy span; triton_example has one 94 µs kernel)."""
    from gpudoctor.pipeline import analyze_paths

    report = analyze_paths([str(HTA)])
    assert report.bottleneck is not None and "rank 14" in report.bottleneck.line
    said = [n for n in report.notes if "busy span" in n]
    assert said and said[0].startswith("rank 14: the GPU idles 100% of the step"), report.notes
    single = analyze_paths([str(SHARED / "h200" / "resnet_bf16.json.gz")])
    assert not [n for n in single.notes if "busy span" in n]   # the two measures agree there: no note
