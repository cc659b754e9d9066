"""GD307: anomaly detection left on warns; behind a debugging option it is info.

The corpus's one GD307 warning was torchtitan's ``if debug_config.detect_anomaly:`` — the opt-in
switch the rule's own fix asks for.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from static_helpers import check_findings

from gpudoctor.model import Severity

_LOOP = """\
for step in range(100):
    loss = model(torch.randn(8, 8, device="cuda")).sum()
    loss.backward()
"""


def _gd307(tmp_path: Path, setup: str) -> list[tuple[int, Severity]]:
    script = tmp_path / "train.py"
    script.write_text("import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\n"
                      "args = parser.parse_args()\nmodel = torch.nn.Linear(8, 1).cuda()\n" + setup + _LOOP)
    return [(f.location.line or 0, f.severity) for f in check_findings([script]) if f.code == "GD307"]


def test_anomaly_detection_switched_on_unconditionally_warns(tmp_path: Path) -> None:
    assert _gd307(tmp_path, "torch.autograd.set_detect_anomaly(True)\n") == [(7, Severity.WARNING)]


def test_a_condition_that_is_no_debug_option_still_warns(tmp_path: Path) -> None:
    assert _gd307(tmp_path, "if torch.cuda.is_available():\n    torch.autograd.set_detect_anomaly(True)\n") == \
        [(8, Severity.WARNING)]


@pytest.mark.parametrize("setup", [
    "if args.debug:\n    torch.autograd.set_detect_anomaly(True)\n",
    "if cfg.debug.detect_anomaly:\n    torch.autograd.set_detect_anomaly(True, check_nan=False)\n",
    "def enable_debug_mode():\n    torch.autograd.set_detect_anomaly(True)\n",
])
def test_behind_a_debug_option_it_is_info(tmp_path: Path, setup: str) -> None:
    assert _gd307(tmp_path, setup) == [(8, Severity.INFO)]


def test_a_mode_read_from_an_option_is_info(tmp_path: Path) -> None:
    assert _gd307(tmp_path, "torch.autograd.set_detect_anomaly(args.check_grads)\n") == [(7, Severity.INFO)]
