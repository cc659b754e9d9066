"""Import boundaries (STYLE.md): the core never drags in textual/rich/torch; analyze/check never torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE_MODULES = [
    "gpudoctor.model",
    "gpudoctor.catalog",
    "gpudoctor.config",
    "gpudoctor.live.samples",
]


def _loaded_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", CORE_MODULES)
def test_core_is_free_of_views_and_torch(module: str) -> None:
    loaded = _loaded_after(f"import {module}")
    assert not {"textual", "rich", "torch"} & loaded, f"{module} imports a view library or torch"


def test_cli_parser_and_rules_listing_do_not_import_torch_or_textual() -> None:
    loaded = _loaded_after("from gpudoctor.cli import main\nimport io, contextlib\n"
                           "with contextlib.redirect_stdout(io.StringIO()): main(['rules', '--format', 'json'])")
    assert "torch" not in loaded and "textual" not in loaded


def test_top_level_package_is_import_light() -> None:
    loaded = _loaded_after("import gpudoctor")
    assert not {"textual", "rich", "torch", "msgspec", "psutil"} & loaded
