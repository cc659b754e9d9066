"""Pieces of bench/gpu/validate_examples.py that can be checked without a GPU or a long run."""

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
    spec = importlib.util.spec_from_file_location("validate_examples", REPO / "bench" / "gpu" / "validate_examples.py")
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
    v = _validator()
    source = (REPO / "examples" / "cudnn_benchmark_off.py").read_text()
    unfixed = v.FIX_BLOCK.sub("", source)
    assert "        torch.backends.cudnn.benchmark = True\n" not in unfixed
    assert "        torch.backends.cudnn.benchmark = True\n" in source
    ast.parse(unfixed)  # still a valid script
    (tmp_path / "cudnn_benchmark_off.py").write_text(unfixed)
    assert "GD208" in _codes(capsys, tmp_path / "cudnn_benchmark_off.py")
    assert "GD208" not in _codes(capsys, REPO / "examples" / "cudnn_benchmark_off.py")


def test_table_marks_missing_expected_findings_and_false_positives() -> None:
    v = _validator()
    zoo = sys.modules["zoo"]
    ex = zoo.BY_NAME["input_bound"]
    row = v.Row(ex, variants={False: v.Variant(False, codes={"GD303"}, rate_alone=10.0, rate_attached=9.5),
                              True: v.Variant(True, codes={"GD102", "GD101"}, rate_alone=20.0)})
    line = v.table([row], cpu=False)[2]
    assert "| **no** |" in line            # GD102 was expected and not found
    assert "| GD303 |" in line             # an unexpected finding on the unfixed run
    assert "| GD102 |" in line             # still there after the fix; GD101 is allowed (also_ok)
    assert "(-5.0%)" in line and "2.00x" in line


def test_every_example_has_cpu_expectations_within_its_gpu_expectations() -> None:
    _validator()
    zoo = sys.modules["zoo"]
    for ex in zoo.EXAMPLES:
        assert set(ex.expected_on(True)) <= set(ex.expected), ex.name
