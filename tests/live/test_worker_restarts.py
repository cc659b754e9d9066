"""GD106 live: a DataLoader whose workers are forked again every epoch is named with what the starts
cost per step, measured by the agent in the real process; persistent workers are not."""

from __future__ import annotations

import json
import sys

from live_helpers import HERE, run_cli


def _run(mode: str) -> dict:  # type: ignore[type-arg]
    # 3 s windows in a 10 s watch: a live finding shows once it held in two of them (live/hysteresis.py)
    proc = run_cli("run", "--duration", "10", "--window", "3", "--no-auto-profile", "--no-stacks", "--format", "json", "--",
                   sys.executable, str(HERE / "epoch_loop.py"), "14", mode, timeout_s=150)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_workers_forked_every_epoch_are_named_with_their_cost() -> None:
    report = _run("restarted")
    found = [f for f in report["findings"] if f["code"] == "GD106" and "live" in (f.get("sources") or [f.get("source")])]
    assert found, report["findings"]
    evidence = {e["name"]: e["value"] for e in found[0]["evidence"]}
    assert evidence["loader_worker_starts"] >= 2
    # two workers forked per epoch of 8 steps: a few ms per step at the least
    assert evidence["loader_start_ms_per_step"] >= evidence["loader_start_fork_ms_per_step"] > 0.5
    assert found[0]["impact"] is not None and found[0]["impact"]["est_speedup_low"] > 1.0
    # gpudoctor's own CPU is in the report: the agent's thread (asked over its socket) and the watcher
    assert 0.0 <= report["steps"]["agent_cpu_pct"] < 20.0
    assert any(n.startswith("gpudoctor's own cost: the agent's thread") for n in report["notes"]), report["notes"]
    # the agent splits the wait: most of it is the restarts', GD106's (tests/agent/test_wait_split.py)
    assert report["steps"]["data_wait_restart_ms_per_step"] > report["steps"]["data_wait_main_ms_per_step"]
    # the first batches' wait after each start is input wait too: where GD102 fires beside it, the lower
    # of the two says that their gains do not add (catalog/merge.py mark_shared_costs)
    pair = [f for f in report["findings"] if f["code"] in ("GD102", "GD106") and f["impact"] is not None]
    if len(pair) == 2:
        assert pair[0]["impact"]["shares_cost_with"] is None and pair[1]["impact"]["shares_cost_with"] == pair[0]["code"]


def test_persistent_workers_are_not_named() -> None:
    report = _run("persistent")
    assert report["steps"]["steps_total"] > 20
    assert not [f for f in report["findings"] if f["code"] == "GD106"], report["findings"]
