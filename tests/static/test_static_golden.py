"""Golden tests, TorchFix style: each fixture under tests/data/static/golden/ has the exact
``line:col CODE message`` lines it must produce in ``<fixture>.expected`` beside it. Every fixture
mixes positive and negative cases (the negatives are the lines that must NOT appear).

Set GPUDOCTOR_REGEN_GOLDEN=1 to rewrite the .expected files, then review the diff by hand.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from static_helpers import GOLDEN, check_findings, golden_lines

#: Deployment fixtures are checked together with a training script whose DataLoader uses workers,
#: so that the shared-memory rule (GD103) has the project context it needs.
CONTEXT = {"k8s.yaml": ["train_workers.py"], "compose.yaml": ["train_workers.py"],
           "launch.sh": ["train_workers.py"]}
FIXTURES = sorted(p.name for p in GOLDEN.iterdir() if not p.name.endswith(".expected"))


@pytest.mark.parametrize("name", FIXTURES)
def test_golden(name: str) -> None:
    path = GOLDEN / name
    findings = check_findings([path, *(GOLDEN / c for c in CONTEXT.get(name, []))])
    got = golden_lines(findings, path)
    expected_file = Path(f"{path}.expected")
    if os.environ.get("GPUDOCTOR_REGEN_GOLDEN"):
        expected_file.write_text("".join(line + "\n" for line in got), encoding="utf-8")
    expected = expected_file.read_text(encoding="utf-8").splitlines()
    assert got == expected


def test_every_static_rule_has_a_golden_case() -> None:
    from gpudoctor.catalog import load_catalog
    from gpudoctor.model import Source

    static_codes = {r.code for r in load_catalog() if Source.STATIC in r.sources}
    covered = set()
    for expected in GOLDEN.glob("*.expected"):
        covered |= {line.split()[1] for line in expected.read_text().splitlines() if line.strip()}
    assert static_codes - covered == set()
