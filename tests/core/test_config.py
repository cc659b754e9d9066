"""User configuration from pyproject.toml / gpudoctor.toml."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.config import load_config
from gpudoctor.exitcodes import ExitCode, UserError


def test_pyproject_tool_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname="x"\n[tool.gpudoctor]\nselect=["GD1"]\nfail-on="critical"\n'
        '[tool.gpudoctor.options.GD101]\nmax_idle_pct=45\n')
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    cfg = load_config(start=sub)
    assert cfg.select == ["GD1"] and cfg.fail_on == "critical"
    assert cfg.options == {"GD101": {"max_idle_pct": 45}}


def test_gpudoctor_toml_wins_in_same_directory(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\nselect=["GD1"]\n')
    (tmp_path / "gpudoctor.toml").write_text('ignore=["GD101"]\n')
    cfg = load_config(start=tmp_path)
    assert cfg.ignore == ["GD101"] and cfg.select == []


def test_pyproject_without_table_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname="x"\n')
    assert load_config(start=tmp_path).path is None or load_config(start=tmp_path).path != tmp_path / "pyproject.toml"


def test_malformed_config_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "gpudoctor.toml"
    bad.write_text("select = [")
    with pytest.raises(UserError) as info:
        load_config(bad)
    assert info.value.code == ExitCode.USAGE
