"""The live collectors, facts and session never import views (textual/rich) or torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIVE_MODULES = ["gpudoctor.live.nvml", "gpudoctor.live.process", "gpudoctor.live.shm", "gpudoctor.live.stacks",
                "gpudoctor.live.facts", "gpudoctor.live.hysteresis", "gpudoctor.live.session",
                "gpudoctor.live.report"]


@pytest.mark.parametrize("module", LIVE_MODULES)
def test_live_module_is_free_of_views_and_torch(module: str) -> None:
    code = f"import {module}, sys; print('\\n'.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                timeout=120).stdout.split())
    assert not {"textual", "rich", "torch"} & loaded, f"{module} imports a view library or torch"
