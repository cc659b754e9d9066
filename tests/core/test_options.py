"""Rule options resolved once and validated (issue 37 item 1), and the ``[gate]`` front matter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.catalog import check_rule_facts
from gpudoctor.catalog.options import resolve_options
from gpudoctor.catalog.rulefile import RuleFileError, parse_rule_text
from gpudoctor.exitcodes import ExitCode, UserError


def test_overrides_by_code_or_name_land_on_the_rule_code() -> None:
    catalog = load_catalog()
    resolved = resolve_options(catalog, {"input-bound": {"max_dataloader_pct": 25}, "GD601": {"min_steps": 9}})
    assert resolved["GD102"]["max_dataloader_pct"] == 25
    assert resolved["GD102"]["critical_dataloader_pct"] == 40.0        # the rule file's, untouched
    assert resolved["GD601"]["min_steps"] == 9
    assert resolved["GD201"]["impact_warning_speedup"] == 1.1           # every rule has the defaults


@pytest.mark.parametrize(("overrides", "said"), [
    ({"GD999": {"x": 1}}, "no rule has that code or name"),
    ({"input-bund": {"max_dataloader_pct": 1}}, "'input-bund'"),
    ({"GD102": {"max_dataloader": 1}}, "it has no option 'max_dataloader'"),
    ({"GD102": {"max_dataloader_pct": "ten"}}, "max_dataloader_pct must be a number"),
    ({"GD102": {"max_dataloader_pct": True}}, "must be a number"),
])
def test_an_override_that_would_do_nothing_is_a_usage_error(overrides: dict, said: str) -> None:
    with pytest.raises(UserError) as err:
        resolve_options(load_catalog(), overrides)
    assert err.value.code == ExitCode.USAGE and said in str(err.value)


def test_the_cli_names_an_unknown_option_in_one_sentence(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor.options.GD102]\nmax_dataloader_percent = 5\n')
    (tmp_path / "train.py").write_text("print('hi')\n")
    done = subprocess.run([sys.executable, "-m", "gpudoctor", "check", "train.py"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "max_dataloader_percent" in done.stderr and "Traceback" not in done.stderr


_RULE = """+++
code = "GD950"
name = "probe-rule"
title = "A probe"
{extra}
[options]
{option} = 1.0

[[when]]
id = "trace-step-time"
source = "trace"
scope = "rank"
condition = "step_time_p50_ms > 0"
message = "x"
+++

## What it detects

x
"""


def test_an_option_named_like_a_fact_is_refused_at_rule_load() -> None:
    rule = parse_rule_text(_RULE.format(extra="", option="step_time_p50_ms"))
    with pytest.raises(RuleFileError, match="option named like a fact: step_time_p50_ms"):
        check_rule_facts(rule, "probe.md")


def test_a_gate_is_read_and_checked() -> None:
    gate = '[gate]\nfact = "data_wait_pct"\nabove = "limit_pct"\nholds_back = "gpu"\nno_gain_below = 1.05\n'
    rule = parse_rule_text(_RULE.format(extra=gate, option="limit_pct"))
    assert rule.gate is not None and (rule.gate.above, rule.gate.no_gain_below) == ("limit_pct", 1.05)
    with pytest.raises(RuleFileError, match="must name one of the rule's"):
        parse_rule_text(_RULE.format(extra=gate.replace('"limit_pct"', '"other"'), option="limit_pct"))
    with pytest.raises(RuleFileError, match="exactly fact, above"):
        parse_rule_text(_RULE.format(extra='[gate]\nfact = "data_wait_pct"\n', option="limit_pct"))


def test_gd102_declares_the_input_gate() -> None:
    gate = load_catalog().get("GD102").gate   # type: ignore[union-attr]
    assert gate is not None and gate.fact == "data_wait_pct" and gate.above == "max_dataloader_pct"
