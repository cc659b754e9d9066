"""The cross-node Prometheus rules (``docs/prometheus/gpudoctor-rules.yml``), checked by ``promtool``.

A job spread over several nodes is watched by one ``gpudoctor attach --prometheus`` per node; the
straggler and hang verdicts over *all* its ranks are Prometheus recording/alerting rules. They are
tested here with ``promtool test rules`` on series a real exporter produced
(``data/prometheus_series.json``, written by ``record_prometheus_series.py`` from two real 2-rank gloo
runs): each rank's series is given to promtool as if its node exported it (``instance="node-<rank>"``),
so the rules see two nodes of one rank each and judge them with no help from the node-local verdicts.

promtool comes with Debian's ``prometheus`` package (``apt-get install prometheus``); without it the
promtool tests skip and say so. The thresholds in the rules must equal the rule files' options.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpudoctor.catalog.catalog import builtin_rules_dir
from gpudoctor.catalog.rulefile import load_rule_file

HERE = Path(__file__).resolve().parent
RULES = HERE.parents[1] / "docs" / "prometheus" / "gpudoctor-rules.yml"
SERIES = HERE / "data" / "prometheus_series.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool is not installed (Debian/Ubuntu: "
                                    "apt-get install prometheus); the cross-node rules are not run")


def _options(code: str) -> dict[str, Any]:
    return dict(load_rule_file(next(builtin_rules_dir().glob(f"{code}-*.md"))).options)


def _rules() -> dict[str, dict[str, Any]]:
    """Rules by record/alert name (the two GD601 alerts by name + cause)."""
    out = {}
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            out[name + (f"/{rule['labels']['cause']}" if "cause" in rule.get("labels", {}) else "")] = rule
    return out


def _has(expr: str, pattern: str, value: float) -> bool:
    """Whether ``expr`` contains ``pattern`` with ``{}`` replaced by the number ``value``."""
    numbers = [float(m) for m in re.findall(pattern.replace("{}", r"([0-9.]+)"), expr)]
    return value in numbers


def test_the_rules_use_the_rule_files_thresholds() -> None:
    gd601, gd610, gd613 = _options("GD601"), _options("GD610"), _options("GD613")
    rules = _rules()
    slow = rules["run:gpudoctor_rank_slow"]["expr"]
    assert _has(slow, r"run:gpudoctor_straggler_score < {}", gd601["min_straggler_score"])
    assert _has(slow, r"gpudoctor_collective_wait_ratio \* {}", gd601["min_wait_ratio"])
    assert _has(slow, r":max >= {}\)", gd601["min_peer_wait_pct"] / 100.0)
    assert _has(slow, r"excess_seconds >= {}", gd601["min_excess_ms"] / 1000.0)
    for cause in ("input", "not-input"):
        rule = rules[f"GD601StragglerRank/{cause}"]
        assert _has(rule["expr"], r">= {} \* run:", gd601["min_input_share"])
        assert rule["for"] == f"{(gd601['min_slow_windows'] - 1) * 15}s"  # 3 evaluations 15 s apart
    hung = rules["GD613RanksHung"]["expr"]
    assert _has(hung, r"stalled_seconds >= {} and", gd613["hang_after_s"])
    assert _has(hung, r">= {} \* max by", gd613["hang_step_multiple"])
    assert _has(rules["GD610RankDesync"]["expr"], r"stalled_seconds >= {}", gd610["min_stall_s"])


@needs_promtool
def test_promtool_checks_the_rules_file() -> None:
    out = subprocess.run([PROMTOOL, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr


def _input_series(run: str, scrapes: list[dict]) -> list[dict[str, str]]:
    """promtool ``input_series`` from recorded scrapes: one series per metric and rank, one value per
    scrape (``_`` where a scrape lacked it), each rank as if its own node had exported it."""
    keys: dict[tuple[str, str], list[str]] = {}
    for i, scrape in enumerate(scrapes):
        for name, labels, value in scrape["samples"]:
            values = keys.setdefault((name, labels["rank"]), ["_"] * len(scrapes))
            values[i] = repr(value)
    return [{"series": f'{name}{{job="gpudoctor",run="{run}",instance="node-{rank}:9464",rank="{rank}"}}',
             "values": " ".join(values)} for (name, rank), values in sorted(keys.items())]


def _alert(name: str, at_s: float, run: str, expected: list[dict[str, str]]) -> dict[str, Any]:
    base = {"job": "gpudoctor", "run": run}
    return {"eval_time": f"{int(at_s)}s", "alertname": name,
            "exp_alerts": [{"exp_labels": {**base, **labels}} for labels in expected]}


def _promtool_test(tmp_path: Path, tests: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
    """Run ``promtool test rules`` on the rules without their annotations (templates of the rendered
    text; ``promtool check rules`` checks them) and ``tests``."""
    rules = yaml.safe_load(RULES.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules))
    every = int(json.loads(SERIES.read_text())["every_s"])
    (tmp_path / "test.yml").write_text(yaml.safe_dump({"rule_files": ["rules.yml"], "evaluation_interval": f"{every}s",
                                                       "tests": tests}))
    return subprocess.run([PROMTOOL, "test", "rules", str(tmp_path / "test.yml")], capture_output=True, text=True,
                          timeout=120)


@needs_promtool
def test_cross_node_straggler_is_named_from_a_real_runs_series(tmp_path: Path) -> None:
    """Rank 1 of the recorded run did extra compute: across "nodes" it is GD601's straggler, not input;
    rank 0 is not; nothing hangs."""
    data = json.loads(SERIES.read_text())
    scrapes, every = data["runs"]["straggler"], int(data["every_s"])
    end = (len(scrapes) - 1) * every
    node1 = {"instance": "node-1:9464", "rank": "1", "severity": "warning", "code": "GD601"}
    test = {"interval": f"{every}s", "input_series": _input_series("straggler", scrapes), "alert_rule_test": [
        _alert("GD601StragglerRank", end, "straggler", [{**node1, "cause": "not-input"}]),
        _alert("GD613RanksHung", end, "straggler", []),
        _alert("GD610RankDesync", end, "straggler", []),
    ]}
    out = _promtool_test(tmp_path, [test])
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_cross_node_hang_fires_only_once_the_ranks_stop(tmp_path: Path) -> None:
    """The recorded hang run: both ranks train (healthy: no straggler, no hang), then rank 1 blocks
    before the all-reduce and rank 0 waits in it at the same step — GD613 after hang_after_s."""
    data = json.loads(SERIES.read_text())
    scrapes, every = data["runs"]["hang"], int(data["every_s"])
    steps = {i: {lab["rank"]: v for name, lab, v in s["samples"] if name == "gpudoctor_steps_total"}
             for i, s in enumerate(scrapes)}
    moving = [i for i in range(1, len(scrapes)) if steps[i] != steps[i - 1]]
    last_move = max(moving) * every
    end = (len(scrapes) - 1) * every
    assert end - last_move >= 90, "the recording should hold at least 90 s of the hang"
    assert len(set(steps[len(scrapes) - 1].values())) == 1, "both ranks stop at the same step"
    hung = {"severity": "critical", "code": "GD613"}
    test = {"interval": f"{every}s", "input_series": _input_series("hang", scrapes), "alert_rule_test": [
        _alert("GD613RanksHung", last_move - every, "hang", []),           # still training
        _alert("GD601StragglerRank", last_move - every, "hang", []),       # healthy: nobody is slow
        _alert("GD613RanksHung", last_move + 30, "hang", []),              # stopped, but for < 60 s
        _alert("GD613RanksHung", end, "hang", [hung]),
        _alert("GD610RankDesync", end, "hang", []),                        # same step: a hang, not a desync
    ]}
    out = _promtool_test(tmp_path, [test])
    assert out.returncode == 0, out.stdout + out.stderr


@needs_promtool
def test_promtool_checks_the_example_alerts_in_the_docs(tmp_path: Path) -> None:
    """The per-node alerts shown in docs/prometheus.md (GD601 status, GD610, GD613, input) load too."""
    docs = (HERE.parents[1] / "docs" / "prometheus.md").read_text()
    (block,) = re.findall(r"```yaml\n(# alerts\.yml.*?)```", docs, re.S)
    (tmp_path / "alerts.yml").write_text(block)
    out = subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "alerts.yml")], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0 and "4 rules found" in out.stdout, out.stdout + out.stderr
