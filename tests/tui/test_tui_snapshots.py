"""How the dashboard looks, at 80×24 and 160×48, from recorded H200 sessions (pytest-textual-snapshot).

Rules come from a pinned copy (tests/data/tui/rules) and time from the recording, so only a change
in the dashboard itself (or in textual, which is pinned) changes these pictures. Update them with
``pytest tests/tui --snapshot-update`` after checking the new SVGs by eye.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from recorded import pinned_catalog, profiled_session

from gpudoctor.report.model import MetricTable, Report
from gpudoctor.tui.app import GpudoctorApp

SIZES = [(80, 24), (160, 48)]


def live_app(workload: str) -> GpudoctorApp:
    catalog = pinned_catalog()
    return GpudoctorApp(session=profiled_session(workload, catalog), catalog=catalog, refresh_s=0.2,
                        export_dir=Path("/nonexistent"))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_input_bound_dashboard(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(live_app("input_bound"), terminal_size=size)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_fp32_dashboard_with_fix_open(snap_compare, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    assert snap_compare(live_app("fp32"), terminal_size=size, press=["enter"])


def test_trace_browser(snap_compare) -> None:  # type: ignore[no-untyped-def]
    catalog = pinned_catalog()
    findings = list(profiled_session("input_bound", catalog).snapshot().findings)
    table = MetricTable("Per rank", ["rank", "idle_pct", "compute_pct", "dataloader_pct"],
                        [{"rank": 0, "idle_pct": 71.4, "compute_pct": 26.9, "dataloader_pct": 61.3}])
    report = Report("analyze", ["loader_bound.json.gz"], findings=findings, tables=[table], elapsed_s=0.8)
    assert snap_compare(GpudoctorApp(report=report, catalog=catalog), terminal_size=(80, 24))
