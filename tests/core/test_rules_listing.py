"""`gpudoctor rules` at 80 columns keeps every rule name whole (it used to wrap them mid-word)."""

from __future__ import annotations

import os
import subprocess
import sys

from gpudoctor.catalog import load_catalog


def test_rule_names_stay_whole_at_80_columns() -> None:
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "gpudoctor", "rules"], capture_output=True, text=True, env=env,
                         timeout=60, check=True).stdout
    lines = out.splitlines()
    for rule in load_catalog():
        assert any(line.split()[:2] == [rule.code, rule.name] for line in lines if line.strip()), rule.name
    assert all(len(line.rstrip()) <= 80 for line in lines)
