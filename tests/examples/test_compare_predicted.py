"""compare puts the fixed finding's estimate beside the measured speedup (predicted vs measured)."""

from __future__ import annotations

from gpudoctor.compare.diff import compare_sides, predicted_vs_measured, to_report
from gpudoctor.compare.inputs import side_from_dict


def _report(step_ms: float, findings: list[dict]) -> dict:
    return {"gpudoctor": "test", "command": "attach", "findings": findings,
            "steps": {"step_ms": [step_ms * (1 + 0.01 * (i % 5)) for i in range(40)]}}


def test_fixed_finding_estimate_is_set_beside_the_measured_speedup() -> None:
    gd201 = {"code": "GD201", "name": "missing-autocast", "where": "rank 0", "severity": "critical",
             "impact": {"est_speedup_low": 1.5, "est_speedup_high": 1.9}}
    gd203 = {"code": "GD203", "name": "channels-last-missing", "where": "rank 0", "severity": "warning",
             "impact": {"est_speedup_low": 1.1, "est_speedup_high": 1.2}}
    before = side_from_dict("before.json", _report(40.0, [gd203, gd201]), "recording")
    after = side_from_dict("after.json", _report(24.0, [gd203]), "recording")
    assert [k.code for k in before.findings] == ["GD201", "GD203"]  # largest estimated gain first
    comparison = compare_sides(before, after)
    check = predicted_vs_measured(comparison)
    assert check is not None and check["code"] == "GD201"
    assert abs(check["measured_speedup"] - 40.0 / 24.0) < 0.01 and check["within_estimate"]
    report = to_report(comparison)
    assert any("GD201 was estimated at 1.50–1.90×; measured 1.67× (inside the estimate)." in n for n in report.notes)
