"""Tables are laid out by one helper (report/tables.py) for every view."""

from __future__ import annotations

import io

from gpudoctor.report.model import MetricTable, Report
from gpudoctor.report.render import render
from gpudoctor.report.tables import layout, plain_lines


def test_a_one_row_table_reads_metric_value_not_its_first_value_as_header() -> None:
    """The agent's step summary printed as "metric  steps_total 131"."""
    steps = MetricTable("Training steps (agent)", ["steps_total", "steps_per_s", "step_source"],
                        [{"steps_total": 131, "steps_per_s": 9.94, "step_source": "optimizer"}])
    shape = layout(steps, 40)
    assert shape.header == ["metric", "value"]
    assert shape.rows == [["steps_total", "131"], ["steps_per_s", "9.94"], ["step_source", "optimizer"]]
    out = io.StringIO()
    render(Report("attach", [], tables=[steps]), "text", out)
    assert "steps_total 131" not in out.getvalue() and "steps_total" in out.getvalue()
    assert plain_lines(steps)[0].split() == ["metric", "value"]


def test_a_wide_table_keyed_by_rank_turns_on_its_side() -> None:
    cols = ["rank", *(f"metric_{k}_pct" for k in range(12))]
    ranks = MetricTable("Ranks", cols, [{"rank": r, **{c: 1.5 for c in cols[1:]}} for r in (0, 1)])
    shape = layout(ranks, 80)
    assert shape.header == ["metric", "rank 0", "rank 1"] and shape.rows[0] == ["metric_0_pct", "1.5", "1.5"]
    assert layout(ranks, 1000).header == cols   # wide enough: rows stay rows


def test_a_table_too_wide_for_its_names_breaks_them_after_an_underscore_not_inside_a_word(monkeypatch) -> None:
    """`analyze` on many ranks at 80 columns printed "step_time_p5" over "0_ms" (rich's fold)."""
    cols = ["rank", "step_time_p50_ms", "outside_collective_ms", "straggler_score", "step_time_score",
            "straggler_cause", "late_collective_pct"]
    rows = [{"rank": r, "step_time_p50_ms": 148.3, "outside_collective_ms": None, "straggler_score": 0.927,
             "step_time_score": 0.927, "straggler_cause": "input", "late_collective_pct": None} for r in range(12)]
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    render(Report("analyze", [], tables=[MetricTable("Ranks compared", cols, rows)]), "text", out)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    words = {w for line in text.splitlines() for w in line.split()}
    assert {"p50_ms", "straggler_", "collective_"} <= words
    assert not {w for w in words if w.startswith("p5") and w != "p50_ms"}  # no "p5" / "0_ms" halves
    monkeypatch.setenv("COLUMNS", "200")  # room for every name: one header line, names whole
    wide = io.StringIO()
    render(Report("analyze", [], tables=[MetricTable("Ranks compared", cols, rows)]), "text", wide)
    assert "step_time_p50_ms" in wide.getvalue() and "late_collective_pct" in wide.getvalue()


def test_the_title_names_many_inputs_by_their_folder_and_a_few_short_ones_by_name() -> None:
    from gpudoctor.report.render import inputs_in_words

    assert inputs_in_words(["t/rank0.json"]) == "t/rank0.json"
    assert inputs_in_words(["t/rank0.json", "t/rank1.json"]) == "t/rank0.json, t/rank1.json"
    many = [f"../shared/traces/public/hta/run_{k}/rank{k}.pt.trace.json.gz" for k in range(15)]
    assert inputs_in_words(many) == "15 files under ../shared/traces/public/hta/"
    assert inputs_in_words(["/abs/a" * 10, "rel/b" * 10]).endswith("rel/b" * 10)   # no shared folder


def test_notes_wrap_under_their_text_not_back_at_column_zero(monkeypatch) -> None:
    """`analyze` at 80 columns wrapped long notes and not-evaluated lines to column 0."""
    monkeypatch.setenv("COLUMNS", "80")
    note = "rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz: no GPU events (CPU-only trace): GPU metrics are not computed."
    out = io.StringIO()
    render(Report("analyze", ["a.json"], notes=[note]), "text", out)
    lines = [ln for ln in out.getvalue().splitlines() if ln.strip()]
    at = next(k for k, ln in enumerate(lines) if ln.startswith("note: "))
    assert len(lines) > at + 1 and lines[at + 1].startswith(" " * len("note: ")), lines
    assert all(len(ln) <= 80 for ln in lines[at:])
    assert " ".join(ln.strip().removeprefix("note: ") for ln in lines[at:]) == note
