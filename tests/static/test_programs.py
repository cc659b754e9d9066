"""Entry points, not files (issue 34 item 1): each Python file is judged by its program — what it, the
project modules it imports and the scripts that import it do — never by everything checked.

The fixture ``tests/data/static/programs/mixed/`` is a project of its own (its pyproject.toml), with an
fp32 script, a script whose backward runs inside a loss-scaler call, a CPU-only script, a module whose
loop a script beside it runs under autocast, and a numerics test with ``autocast("cpu")``. Its findings
are golden (``mixed.expected``), and must be the same whether the project or one folder is checked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from static_helpers import DATA, check_findings

from gpudoctor.static.files import DEFAULT_TEST_FILES

PROGRAMS = DATA / "programs"


def _lines(paths: list[Path], root: Path) -> list[str]:
    findings = check_findings(paths, test_files=DEFAULT_TEST_FILES)
    out = [f"{Path(f.location.path or '').resolve().relative_to(root.resolve())}:{f.location.line}:"
           f"{f.location.col} {f.code} {f.message}" for f in findings]
    return sorted(out)


@pytest.mark.parametrize("name", sorted(p.name for p in PROGRAMS.iterdir() if p.is_dir()))
def test_program_golden(name: str) -> None:
    root = PROGRAMS / name
    got = _lines([root], root)
    expected_file = PROGRAMS / f"{name}.expected"
    if os.environ.get("GPUDOCTOR_REGEN_GOLDEN"):
        expected_file.write_text("".join(line + "\n" for line in got), encoding="utf-8")
    assert got == expected_file.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name", sorted(p.name for p in PROGRAMS.iterdir() if p.is_dir()))
def test_checking_one_folder_or_file_gives_that_file_the_same_findings(name: str) -> None:
    root = PROGRAMS / name
    whole = _lines([root], root)
    for path in sorted(root.rglob("*.py")):
        mine = [line for line in whole if line.startswith(f"{path.relative_to(root)}:")]
        for checked in (path.parent, path):
            alone = [line for line in _lines([checked], root) if line.startswith(f"{path.relative_to(root)}:")]
            assert alone == mine, f"check {checked.relative_to(root)} gives {path.name} other findings"


def test_an_unrelated_autocast_does_not_hide_a_missing_one() -> None:
    got = _lines([PROGRAMS / "mixed"], PROGRAMS / "mixed")
    assert any(line.startswith("train_fp32.py:8:") and " GD201 " in line for line in got)
    assert not any(line.startswith("tests/") and " GD802 " not in line for line in got)


#: Static rules on Python sites that judge tests and CPU-only code as any file: correctness and
#: security, not GPU performance. Every other rule on a python.* scope must read ``gpu_job``.
JUDGE_EVERY_FILE = {"GD205", "GD207", "GD310", "GD604", "GD611", "GD614", "GD802", "GD899"}


def test_gpu_performance_rules_judge_gpu_jobs_only() -> None:
    from gpudoctor.catalog import load_catalog

    missing = []
    for rule in load_catalog():
        for when in rule.whens:
            if when.source.value == "static" and when.scope.startswith("python.") and \
                    "gpu_job" not in when.condition.text and rule.code not in JUDGE_EVERY_FILE:
                missing.append(f"{rule.code} ({when.scope}: {when.condition.text})")
    assert not missing, "GPU-performance rules that would judge tests and CPU-only code: " + "; ".join(missing)


def test_test_files_setting_brings_tests_back(tmp_path: Path) -> None:
    import shutil

    from gpudoctor.static.runner import run_checks

    root = tmp_path / "mixed"
    shutil.copytree(PROGRAMS / "mixed", root)
    test = root / "tests" / "numerics.py"
    judged = check_findings([root], test_files=())
    assert {f.code for f in judged if f.location.path == str(test)} >= {"GD102", "GD105", "GD802"}
    assert not run_checks([str(test)], jobs=1, test_files=()).factsets[0].values["file_is_test"]
