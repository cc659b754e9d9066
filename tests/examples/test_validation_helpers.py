"""Pieces of bench/validation/validate_examples.py that can be checked without a GPU or a long run."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from gpudoctor.cli import main

REPO = Path(__file__).resolve().parents[2]


def _validator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("validate_examples", REPO / "bench" / "validation" / "validate_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["validate_examples"] = module
    spec.loader.exec_module(module)
    return module


def _codes(capsys: pytest.CaptureFixture[str], path: Path) -> set[str]:
    main(["check", str(path), "--format", "json"])
    return {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}


def test_static_example_is_found_without_its_fix_block_and_not_with_it(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _validator()
    source = (REPO / "examples" / "cudnn_benchmark_off.py").read_text()
    unfixed = sys.modules["zoo_runner"].FIX_BLOCK.sub("", source)
    assert "        torch.backends.cudnn.benchmark = True\n" not in unfixed
    assert "        torch.backends.cudnn.benchmark = True\n" in source
    ast.parse(unfixed)  # still a valid script
    (tmp_path / "cudnn_benchmark_off.py").write_text(unfixed)
    assert "GD208" in _codes(capsys, tmp_path / "cudnn_benchmark_off.py")
    assert "GD208" not in _codes(capsys, REPO / "examples" / "cudnn_benchmark_off.py")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_table_marks_missing_expected_findings_and_false_positives() -> None:
    v = _validator()
    zoo = sys.modules["zoo"]
    ex = zoo.BY_NAME["input_bound"]
    row = v.Row(ex, variants={False: v.Variant(False, codes={"GD303", "GD302"}, rate_alone=10.0, rate_alone_after=10.0,
                                               rate_passive=9.5),
                              True: v.Variant(True, codes={"GD102", "GD101"}, rate_alone=20.0)})
    cells = dict(zip(sys.modules["zoo_table"].COLUMNS, _cells(v.table([row], cpu=False)[2]), strict=True))
    assert cells["found?"] == "**no**"                       # GD102 was expected and not found
    assert cells["expected extras (unfixed)"] == "GD302"     # listed in zoo.py with a reason: shown apart
    assert cells["false positives (unfixed)"] == "GD303"     # not listed: a false positive
    # after the fix GD101 is not an accepted extra, and GD102 is still there
    assert cells["after --fix: false positives"] == "GD101, GD102 (still there)"
    assert "(-5.0%)" in cells["steady-state overhead: steps/s alone → attached (passive)"]
    assert cells["speedup, tool-free"] == "2.00x"
    assert cells["goal"].startswith("**not met**") and "missed GD102" in cells["goal"]


def test_goal_uses_fix_kind_and_compare_speedup() -> None:
    v = _validator()
    zoo = sys.modules["zoo"]
    table_mod = sys.modules["zoo_table"]
    slow = v.Row(zoo.BY_NAME["host_sync"], variants={False: v.Variant(False, codes={"GD301"}, rate_alone=100.0),
                                                     True: v.Variant(True, codes=set(), rate_alone=105.0)})
    assert table_mod.goal(slow, cpu=False) == "**not met**: speedup < 1.1x"
    slow.compare = {"speedup": 1.25, "verdict": "improved", "ci95_change_pct": [-22.0, -18.0]}
    assert table_mod.goal(slow, cpu=False) == "met"         # compare's speedup wins over the tool-free one
    memory = v.Row(zoo.BY_NAME["memory_creep"], variants={False: v.Variant(False, codes={"GD503"}, rate_alone=100.0),
                                                          True: v.Variant(True, codes=set(), rate_alone=100.0)})
    assert table_mod.goal(memory, cpu=False) == "met"        # a memory fix is not judged on speed
    for ex in zoo.EXAMPLES:
        assert ex.fix_kind in zoo.FIX_KINDS, ex.name
        assert (ex.fix_kind == "speed") == (not ex.why_not_speed), ex.name
        if ex.also_ok or ex.also_ok_fixed:
            assert ex.extras_reason, f"{ex.name}: expected extras need a one-line reason"
            for code in (*ex.also_ok, *ex.also_ok_fixed):
                assert code in ex.extras_reason, f"{ex.name}: the reason does not mention {code}"


def test_rate_between_uses_progress_lines_inside_the_window() -> None:
    _validator()
    runner = sys.modules["zoo_runner"]
    progress = [(0.0, 5), (1.0, 15), (2.0, 25), (3.0, 45)]
    assert runner.rate_between(progress, 0.5, 2.5) == 10.0
    assert runner.rate_between(progress, 0.0, 3.0) == 40 / 3
    assert runner.rate_between(progress, 2.5, 2.9) is None   # fewer than two lines: no rate


def test_every_example_has_cpu_expectations_within_its_gpu_expectations() -> None:
    _validator()
    zoo = sys.modules["zoo"]
    for ex in zoo.EXAMPLES:
        assert set(ex.expected_on(True)) <= set(ex.expected), ex.name


def test_machine_imposed_codes_and_info_findings_are_not_false_positives() -> None:
    """GD805 is imposed by a host that requires NCCL_NVLS_ENABLE=0 for every job; an info finding
    (a GPU at its power cap) is not a diagnosis. Neither may count as a false positive."""
    _validator()
    import zoo_runner
    import zoo_table

    assert zoo_table.machine_extras({"NCCL_NVLS_ENABLE": "0"}) == {"GD805"}
    assert zoo_table.machine_extras({}) == set()
    report = {"findings": [{"code": "GD701", "severity": "info"}, {"code": "GD201", "severity": "warning"}]}
    assert zoo_runner.codes_of(report) == {"GD201"}
