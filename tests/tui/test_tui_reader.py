"""What a tired engineer reads in the dashboard (issue 38): a filter that hides everything says so and
shows it is on, the footer names the key to the fix, the header keeps the script's name, the step
sparkline has its unit, and a paragraph is printed after ``q``; pictures at 80×24 and 200×60."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from recorded import FakeSession, pinned_catalog, profiled_session, session_snapshots, sync, two_rank_session

from gpudoctor.model import Severity
from gpudoctor.tui.app import GpudoctorApp
from gpudoctor.tui.export import exit_summary
from gpudoctor.tui.format import command_text
from gpudoctor.tui.widgets.detail import FindingDetail, wrap_code
from gpudoctor.tui.widgets.findings import FindingsList, cut

SIZES = [(80, 24), (200, 60)]


def screen_text(app: GpudoctorApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def _app(session: FakeSession) -> GpudoctorApp:
    app = GpudoctorApp(session=session, catalog=pinned_catalog(), refresh_s=0.2, export_dir=Path("/nonexistent"))
    app.cursor_blink = False  # type: ignore[attr-defined]
    return app


def _no_findings_yet() -> FakeSession:
    snapshots = [replace(s, findings=()) for s in session_snapshots(catalog=pinned_catalog())[:4]]
    return FakeSession(snapshots, history_len=len(snapshots) - 1)


@sync
async def test_a_filter_that_hides_a_critical_says_so_and_shows_it_is_on() -> None:
    app = _app(profiled_session("input_bound", pinned_catalog()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.4)
        findings = app.query_one(FindingsList)
        assert any(f.severity is Severity.CRITICAL for f in findings.shown)
        findings.set_filter("nothing-matches-this")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "No findings so far" not in text
        assert "No finding matches the filter" in text and "critical" in text
        assert "filter “nothing-matches-this”: 0 of" in str(findings.border_title)
        findings.set_filter("")
        await pilot.pause(0.2)
        assert findings.border_title == "Findings" and app.query_one(FindingDetail).finding is not None


@sync
async def test_footer_names_the_key_to_the_fix_and_the_sparkline_its_unit() -> None:
    app = _app(profiled_session("input_bound", pinned_catalog()))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.4)
        text = screen_text(app)
        assert "f fix" in text and "q quit" in text   # at 80 columns too
    app = _app(profiled_session("input_bound", pinned_catalog()))
    async with app.run_test(size=(200, 60)) as pilot:
        await pilot.pause(0.4)
        assert "steps/s" in screen_text(app)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@sync
async def test_the_problem_column_shows_each_name_whole_or_marks_the_cut(size: tuple[int, int]) -> None:
    """At 80 columns "input-bound" was shown as "input-boun": the list cut names with no mark."""
    app = _app(profiled_session("input_bound", pinned_catalog()))
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.4)
        findings = app.query_one(FindingsList)
        assert findings.shown
        problems = [str(findings.get_row_at(i)[3]) for i in range(findings.row_count)]
        for finding, shown in zip(findings.shown, problems):
            assert shown == finding.name or (shown.endswith("…") and finding.name.startswith(shown[:-1]))
        text = screen_text(app)
        assert all(shown in text for shown in problems[:3])  # the rows on screen at 80×24
        assert any(f.name == "input-bound" for f in findings.shown) and "input-bound" in text
        if size[0] >= 200:
            assert findings.ordered_columns[-1].label.plain == "where"


def test_cut_marks_what_it_leaves_out() -> None:
    assert cut("input-bound", None) == "input-bound" and cut("input-bound", 11) == "input-bound"
    assert cut("driver-capabilities-without-compute", 16) == "driver-capabili…"


def test_long_code_lines_continue_indented_never_at_column_0() -> None:
    """Syntax(word_wrap=True) wrapped a long line back to column 0 mid-expression (160 columns, GD403)."""
    code = ("    model = torch.compile(model, mode=\"max-autotune\", fullgraph=True)  # compile once, before the loop\n"
            "x = 1")
    for width in (30, 44, 60):
        lines = wrap_code(code, width).splitlines()
        assert all(len(line) <= width for line in lines)
        assert lines[-1] == "x = 1"
        continued = lines[1:-1]
        assert continued and all(line.startswith(" " * 8) for line in continued)  # past the 4-space indent
        joined = " ".join(line.strip().removeprefix("# ") for line in lines[:-1])
        assert joined.split() == code.splitlines()[0].split()   # nothing lost, nothing cut mid-word
        first_comment = next(i for i, line in enumerate(lines) if "#" in line)
        assert all(line.lstrip().startswith("# ") for line in lines[first_comment + 1:-1])  # still a comment
    assert wrap_code("short = 1", 40) == "short = 1"


def test_header_command_keeps_the_script_name() -> None:
    cmd = ["/work/very/long/path/to/a/virtualenv/bin/python3", "-u", "/home/me/projects/examples/input_bound.py",
           "--steps", "0"]
    assert command_text(cmd, 48).startswith("python3 -u input_bound.py --steps 0")


def test_exit_summary_is_one_paragraph_with_the_first_fix() -> None:
    snapshot = profiled_session("input_bound", pinned_catalog())._snapshots[-1]
    text = exit_summary(snapshot, (Path("/tmp/r.md"), Path("/tmp/r.json")))
    assert "\n" not in text and f"pid {snapshot.target_pid}" in text
    assert "Fix first: CRITICAL" in text and "Exported: /tmp/r.md and /tmp/r.json." in text
    assert "No finding" in exit_summary(replace(snapshot, findings=()))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_findings_yet(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(_no_findings_yet()), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_findings_with_a_filter(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause(0.4)
        pilot.app.query_one(FindingsList).set_filter("info")
        await pilot.pause(0.2)

    assert snap_compare(_app(profiled_session("input_bound", pinned_catalog())), terminal_size=size,
                        run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fix_view(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(profiled_session("input_bound", pinned_catalog())), terminal_size=size,
                        press=["enter"])


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_ranks(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(_app(two_rank_session(pinned_catalog())), terminal_size=size)


def test_the_demos_exit_summary_says_it_stops_its_job_and_points_at_the_users_own() -> None:
    """After `q` the demo said "detached, the job keeps running … Next: gpudoctor attach <pid>" of the
    example job it was about to stop, and "…when the step ends.." with two periods."""
    snapshot = profiled_session("input_bound", pinned_catalog())._snapshots[-1]
    text = exit_summary(snapshot, job_stops="the demo stops its example job now.")
    assert "keeps running" not in text and f"attach {snapshot.target_pid}" not in text
    assert "the demo stops its example job now." in text and "gpudoctor run --" in text
    assert ".." not in text
