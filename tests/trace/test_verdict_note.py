"""The verdict and the first card agree on every shared trace, or the report says why (issue 38 item 8)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gpudoctor.report.render import render
from gpudoctor.report.verdict import addresses, verdict_note

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"
CASES = {
    "public/tb_plugin_resnet50/resnet50_num_workers_0": "GD102 (the input pipeline, est.",
    "public/hta/trace_filter": "No finding names a cause inside host overhead",
    "h200/loader_bound.json.gz": "",
    "h200/resnet_fp32.json.gz": "",
}


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is not here")
@pytest.mark.parametrize("trace", sorted(CASES))
def test_first_card_agrees_with_the_verdict_or_the_report_says_why(trace: str) -> None:
    from gpudoctor.pipeline import analyze_paths

    report = analyze_paths([str(SHARED / trace)])
    note = verdict_note(report.bottleneck, report.findings)
    assert note.startswith(CASES[trace]) and bool(note) == bool(CASES[trace]), note
    if not note:   # agreement: the first card shortens the part of the step the verdict names
        assert report.bottleneck is not None and addresses(report.findings[0]) == report.bottleneck.bound
    else:
        out = io.StringIO()
        render(report, "markdown", out)
        assert note in out.getvalue()


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/traces is not here")
def test_every_shared_trace_agrees_or_explains() -> None:
    from gpudoctor.pipeline import analyze_paths

    for path in sorted(p for p in (SHARED / "h200").glob("*.json.gz")):
        report = analyze_paths([str(path)])
        if report.bottleneck is None or not report.findings:
            continue
        first = next((f for f in report.findings if addresses(f)), None)
        agrees = first is not None and addresses(first) == report.bottleneck.bound
        assert agrees or verdict_note(report.bottleneck, report.findings), path.name
