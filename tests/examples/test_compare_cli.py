"""``gpudoctor compare`` end to end: real H200 trace sets, synthetic recordings, bad inputs."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.cli import main


def _recording(path: Path, step_ms: list[float] | list[list[float]], findings: tuple[str, ...] | list[str] = (),
               samples_per_step: int | None = 32) -> Path:
    ranks = step_ms if step_ms and isinstance(step_ms[0], list) else [step_ms]
    data = {
        "gpudoctor": "0.1.0", "schema": 1, "command": "attach", "inputs": ["pid 4242"],
        "findings": [{"code": c, "name": f"rule-{c}", "severity": "warning", "title": "t", "where": "pid 4242"}
                     for c in findings],
        "steps": {"source": "agent", "unit": "ms", "samples_per_step": samples_per_step,
                  "ranks": [{"rank": r, "step_ms": ms} for r, ms in enumerate(ranks)]},
    }
    path.write_text(json.dumps(data, indent=2))
    return path


def _steps(mean_ms: float, n: int = 60, sd_ms: float = 1.5, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [max(0.1, rng.gauss(mean_ms, sd_ms)) for _ in range(n)]


def _compare_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(["compare", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)["compare"]


def test_regression_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _recording(tmp_path / "before.json", _steps(50.0, seed=1), ["GD102"])
    after = _recording(tmp_path / "after.json", _steps(56.0, seed=2), ["GD102", "GD301"])
    code, result = _compare_json(capsys, str(before), str(after))
    assert code == 1
    assert result["verdict"] == "regressed"
    assert 10 < result["step_time_change_pct"] < 14
    assert [f["code"] for f in result["findings_new"]] == ["GD301"]
    assert [f["code"] for f in result["findings_kept"]] == ["GD102"]
    assert result["after"]["samples_per_s"] == pytest.approx(result["after"]["steps_per_s"] * 32)


def test_improvement_exits_0_and_lists_the_finding_that_went_away(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    before = _recording(tmp_path / "before.json", _steps(80.0, seed=3), ["GD102"])
    after = _recording(tmp_path / "after.json", _steps(40.0, seed=4), [])
    code, result = _compare_json(capsys, str(before), str(after))
    assert code == 0
    assert result["verdict"] == "improved"
    assert result["speedup"] == pytest.approx(2.0, rel=0.05)
    assert [f["code"] for f in result["findings_gone"]] == ["GD102"]
    low, high = result["ci95_change_pct"]
    assert low <= result["step_time_change_pct"] <= high


def test_noise_alone_is_no_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _recording(tmp_path / "before.json", _steps(50.0, sd_ms=6.0, n=15, seed=5))
    after = _recording(tmp_path / "after.json", _steps(50.0, sd_ms=6.0, n=15, seed=6))
    code, result = _compare_json(capsys, str(before), str(after), "--threshold", "0")
    assert code == 0
    assert result["verdict"] == "no significant change"


def test_threshold_decides_a_small_but_real_slowdown(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _recording(tmp_path / "before.json", _steps(50.0, sd_ms=0.3, seed=7))
    after = _recording(tmp_path / "after.json", _steps(51.5, sd_ms=0.3, seed=8))  # 3% slower
    assert _compare_json(capsys, str(before), str(after))[0] == 0             # default 5%
    code, result = _compare_json(capsys, str(before), str(after), "--threshold", "1")
    assert (code, result["verdict"]) == (1, "regressed")


def test_multi_rank_job_moves_at_its_slowest_rank(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fast, slow = _steps(30.0, seed=9), _steps(60.0, seed=10)
    before = _recording(tmp_path / "before.json", [fast, slow])
    after = _recording(tmp_path / "after.json", [fast, _steps(31.0, seed=11)])
    code, result = _compare_json(capsys, str(before), str(after))
    assert code == 0 and result["verdict"] == "improved"
    assert result["before"]["median_step_ms"] == pytest.approx(60.0, abs=1.0)
    assert result["before"]["ranks"] == 2


def test_text_and_markdown_name_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _recording(tmp_path / "before.json", _steps(80.0, seed=12), ["GD102"])
    after = _recording(tmp_path / "after.json", _steps(40.0, seed=13))
    assert main(["compare", str(before), str(after), "--format", "markdown"]) == 0
    md = capsys.readouterr().out
    assert "Verdict: improved" in md and "## Step-time change" in md and "| gone | GD102 |" in md
    assert main(["compare", str(before), str(after)]) == 0
    assert "Verdict: improved" in capsys.readouterr().out


@pytest.mark.parametrize(("content", "message"), [
    (None, "does not exist"),
    ('{"gpudoctor": "0.1.0", "trunc', "not valid JSON"),
    ('{"gpudoctor": "0.1.0", "schema": 1}', "not a gpudoctor report or recording"),
    ('{"gpudoctor": "0.1.0", "schema": 1, "command": "attach", "findings": []}', "no step times"),
])
def test_bad_inputs_are_one_sentence_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                content: str | None, message: str) -> None:
    good = _recording(tmp_path / "good.json", _steps(50.0))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    assert main(["compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_negative_threshold_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = _recording(tmp_path / "r.json", _steps(50.0))
    assert main(["compare", str(rec), str(rec), "--threshold", "-1"]) == 2


# ------------------------------------------------------------------ real H200 traces

def test_real_traces_fp32_to_bf16_is_a_2x_improvement(shared_traces: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """README: resnet18 fp32 21.3 steps/s, bf16 42.7 steps/s on the same H200."""
    h200 = shared_traces / "h200"
    code, result = _compare_json(capsys, str(h200 / "resnet_fp32.json.gz"), str(h200 / "resnet_bf16.json.gz"))
    assert code == 0
    assert result["verdict"] == "improved"
    assert result["speedup"] == pytest.approx(42.7 / 21.3, rel=0.1)
    assert result["before"]["steps_per_s"] == pytest.approx(21.3, rel=0.1)
    gone = {f["code"] for f in result["findings_gone"]}
    assert {"GD201", "GD202"} <= gone


def test_real_traces_reverse_direction_is_a_regression(shared_traces: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    h200 = shared_traces / "h200"
    code, result = _compare_json(capsys, str(h200 / "resnet_bf16.json.gz"), str(h200 / "loader_bound.json.gz"))
    assert (code, result["verdict"]) == (1, "regressed")
    assert "GD102" in {f["code"] for f in result["findings_new"]}


def test_saved_analyze_outputs_compare_like_the_traces(shared_traces: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    h200 = shared_traces / "h200"
    saved = []
    for name in ("resnet_fp32", "resnet_bf16"):
        out = tmp_path / f"{name}.json"
        assert main(["analyze", str(h200 / f"{name}.json.gz"), "--per-step", "--format", "json", "-o", str(out)]) in (0, 1)
        capsys.readouterr()
        saved.append(str(out))
    code, result = _compare_json(capsys, *saved)
    assert code == 0 and result["verdict"] == "improved"
    assert result["speedup"] == pytest.approx(2.0, rel=0.1)


def test_recording_with_only_a_median_compares_without_a_noise_estimate(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """What ``attach --format json`` writes today: a ``steps`` summary without samples."""
    def summary(path: Path, p50_ms: float) -> Path:
        path.write_text(json.dumps({"gpudoctor": "0.1.0", "schema": 1, "command": "attach", "findings": [],
                                    "steps": {"steps_total": 40, "step_time_p50_ms": p50_ms}}))
        return path

    code, result = _compare_json(capsys, str(summary(tmp_path / "a.json", 100.0)), str(summary(tmp_path / "b.json", 50.0)))
    assert code == 0 and result["verdict"] == "improved"
    assert result["ci95_change_pct"] is None and result["mann_whitney_p"] is None
    assert "too few step samples" in result["reason"]
