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


# --- Bad configuration files (issue 15): one sentence, exit 2, never a traceback or a hang. ---

@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        ("pyproject.toml", "[tool.gpudoctor]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
        ("gpudoctor.toml", "x = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
        ("gpudoctor.toml", "x = " + "7" * 5000 + "\n", "cannot be read"),
        ("pyproject.toml", "[tool.gpudoctor]\nfail-on = 5\n", "fail-on must be"),
        ("pyproject.toml", "tool = 1\n[x]\n", None),  # no gpudoctor table: not a config
        ("gpudoctor.toml", "options = 3\n", "options must be tables of rule options"),
        # issue 39: values of the wrong type were split into characters or dropped in silence
        ("gpudoctor.toml", 'select = "GD1"\n', "select must be a list of strings.*not a string 'GD1'"),
        ("pyproject.toml", '[tool.gpudoctor]\nignore = [["GD1"]]\n', r"ignore must be a list of strings.*\[\['GD1'\]\]"),
        ("gpudoctor.toml", 'rule-dirs = "rules"\n', "rule-dirs must be a list of strings"),
        ("gpudoctor.toml", 'fail-on = ["warning"]\n', "fail-on must be info, warning or critical"),
        ("gpudoctor.toml", "options.GD102 = 10\n", "options.GD102 must be a table"),
        ("gpudoctor.toml", "[options.GD102]\nmax_dataloader_pct = [10]\n", "option max_dataloader_pct of GD102 must be a number"),
        ("pyproject.toml", '[tool.gpudoctor]\nselct = ["GD1"]\n', "unknown key 'selct' in \\[tool.gpudoctor\\]"),
    ],
)
def test_hostile_config_files_are_one_sentence(tmp_path: Path, name: str, text: str, said: str | None) -> None:
    (tmp_path / name).write_text(text)
    if said is None:
        assert load_config(start=tmp_path).path is None
        return
    with pytest.raises(UserError, match=said) as info:
        load_config(start=tmp_path)
    assert info.value.code == ExitCode.USAGE and "\n" not in str(info.value)


def test_broken_unrelated_pyproject_on_the_way_up_is_skipped(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project\nname = ")
    assert load_config(start=tmp_path).path is None


def test_explicit_config_must_be_a_regular_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "gpudoctor.toml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="FIFO") as info:
        load_config(fifo)  # used to block forever in open()
    assert info.value.code == ExitCode.USAGE
    with pytest.raises(UserError, match="character device"):
        load_config(Path("/dev/zero"))
    with pytest.raises(UserError, match="does not exist"):
        load_config(tmp_path / "nope.toml")


def test_rule_files_must_be_regular_and_small(tmp_path: Path) -> None:
    import os

    from gpudoctor.catalog.rulefile import MAX_RULE_FILE_BYTES, RuleFileError, load_rule_file

    os.mkfifo(tmp_path / "GD990-fifo.md")
    (tmp_path / "GD991-zero.md").symlink_to("/dev/zero")
    (tmp_path / "GD992-huge.md").write_bytes(b"+++\n" + b"#" * (MAX_RULE_FILE_BYTES + 1))
    (tmp_path / "GD993-deep.md").write_text("+++\nx = " + "[" * 3000 + "]" * 3000 + "\n+++\n")
    for name, said in [("GD990-fifo.md", "FIFO"), ("GD991-zero.md", "character device"),
                       ("GD992-huge.md", "above the limit"), ("GD993-deep.md", "nested too deeply")]:
        with pytest.raises(RuleFileError, match=said):
            load_rule_file(tmp_path / name)  # a FIFO used to hang, /dev/zero to read until memory ran out


def test_test_files_is_read_and_checked(tmp_path: Path) -> None:
    (tmp_path / "gpudoctor.toml").write_text('test-files = ["qa/*"]\n')
    assert load_config(start=tmp_path).test_files == ["qa/*"]
    (tmp_path / "gpudoctor.toml").write_text('select = ["GD1"]\n')
    assert load_config(start=tmp_path).test_files is None  # the built-in patterns
    (tmp_path / "gpudoctor.toml").write_text('test-files = "tests/*"\n')
    with pytest.raises(UserError) as info:
        load_config(start=tmp_path)
    assert "test-files must be a list of strings" in str(info.value) and info.value.code == ExitCode.USAGE
