"""Every live and trace ``[[when]]`` block fires on a recorded fact set (ruff's per-rule fixture habit).

The cases in ``tests/data/rule_cases/<CODE>.json`` are measured, not invented: trace blocks keep the
fact set of a real trace on which they fire, live blocks the evidence of a live finding in a JSON
report of a real H200 run, or the live fact set rebuilt from the samples such a report keeps
(``tests/data/rule_cases/make_cases.py`` extracts them). A block with no
recorded case anywhere is listed in :data:`NO_CASE` with the reason and, where a GPU run would
record one, that run. The test fails when a block is neither covered nor listed, when a listed
block has gained a case (take it off the list), and when a case no longer fires — a condition
changed, or a fact was renamed — which is the moment to re-record or re-think the rule.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.expr import MISSING
from gpudoctor.catalog.impact import DEFAULT_OPTIONS
from gpudoctor.catalog.registry import LOCATION_NAMES, REGISTRY
from gpudoctor.catalog.rulefile import Rule, When
from gpudoctor.model import Source

CASES = Path(__file__).resolve().parents[1] / "data" / "rule_cases"
CASE_SOURCES = (Source.LIVE, Source.TRACE)

_ZOO = ("needs a new recording: `python3.12 bench/validation/record_rule_cases.py --only {}` on the H200, its report "
        "copied to tests/data/gpu_runs/<run>/rule_cases/, then make_cases.py (the last zoo run kept only its log)")
_NOT_SEEN = "no recorded run had {}; a recording needs a machine that shows it (not producible on demand)"

#: (rule code, block index) → why no recorded fact set fires it.
NO_CASE: dict[tuple[str, int], str] = {
    ("GD102", 3): _ZOO.format("input_bound"),
    ("GD102", 4): _ZOO.format("input_bound"),
    ("GD102", 5): _ZOO.format("input_bound") + "; the warning band sits between the critical block and healthy",
    ("GD102", 6): _ZOO.format("input_bound") + "; the warning band sits between the critical block and healthy",
    ("GD103", 0): _ZOO.format("small_shm") + " with batches large enough to hit 'No space left on device'",
    ("GD103", 1): _ZOO.format("small_shm"),
    ("GD103", 2): _ZOO.format("small_shm"),
    ("GD103", 3): _ZOO.format("small_shm"),
    ("GD104", 0): _ZOO.format("small_shm") + " (its workers are CPU-bound; GD104 was an extra there)",
    ("GD201", 3): _ZOO.format("no_autocast"),
    ("GD201", 4): _ZOO.format("no_autocast"),
    ("GD202", 1): _ZOO.format("tf32_off") + "; the block reads tf32_matmul and autocast_enabled, new this session",
    ("GD211", 2): "no H200 run recorded since the agent reads weight shapes (this landing); a real CPU loop with a 50257-way head covers it: tests/agent/test_steps.py, tests/live/test_unaligned_weights_live.py",
    ("GD106", 1): "the agent's worker-start facts are new: no recording of the zoo has them yet "
                  "(tests/live/test_worker_restarts.py runs the block on a real process; on the H200, "
                  "tests/data/gpu_runs/h200-dcgan/gd106/ holds a DCGAN report it fired in)",
    ("GD301", 4): _ZOO.format("host_sync") + "; host_syncs_per_step from the agent is new this session (issue 13 item 6)",
    ("GD301", 5): _ZOO.format("host_sync"),
    ("GD305", 0): "no recorded run oversubscribed the CPUs; needs a zoo example with more intra-op threads + workers than allowed CPUs",
    ("GD401", 4): _ZOO.format("graph_breaks"),
    ("GD402", 0): "no recorded trace compiles inside its profiled steps; needs a profile window that starts before torch.compile's first call",
    ("GD402", 2): _ZOO.format("graph_breaks") + " with a shape change that recompiles",
    ("GD402", 3): "no recorded live run recompiled only in warm-up; needs nanoGPT compiled (its first eval-mode recompile) "
                  "from bench/validation/realscripts_validation.py, recorded with the windowed recompile count",
    ("GD501", 0): _ZOO.format("memory_pressure"),
    ("GD501", 1): _ZOO.format("memory_pressure"),
    ("GD501", 2): "no recorded trace was profiled with profile_memory=True near the GPU's limit; needs memory_pressure profiled so",
    ("GD502", 0): _ZOO.format("memory_pressure") + " (the last zoo run missed GD502: no allocator retries were seen)",
    ("GD502", 1): _ZOO.format("memory_pressure"),
    ("GD503", 0): _ZOO.format("memory_creep"),
    ("GD601", 1): "no recorded trace set has 3 or more ranks with NCCL collectives; needs a 4-GPU run of bench/validation/multigpu_validation.py",
    ("GD601", 5): "no recorded trace set has ranks whose steps cannot be compared one by one; HTA's distributed "
                  "traces in ../shared/traces/public/hta have them (tests/trace/test_rank_numbering.py)",
    ("GD601", 4): "needs a new recording: `python3 bench/validation/multigpu_validation.py` (compute case, agent comm hook in every rank) on 2 H200s",
    ("GD609", 2): "no recorded run set NCCL_DEBUG=TRACE; needs bench/validation/multigpu_validation.py with NCCL_DEBUG=TRACE in the job's environment",
    ("GD609", 3): "no recorded run set NCCL_DEBUG=INFO; needs bench/validation/multigpu_validation.py with NCCL_DEBUG=INFO in the job's environment",
    ("GD610", 0): "no recorded run lost a rank; needs `python3.12 bench/validation/ranks_validation.py` with a rank killed mid-run",
    ("GD610", 1): "no recorded run stalled with ranks at different steps; needs `python3.12 bench/validation/ranks_validation.py` with a hang",
    ("GD613", 0): "no recorded run hung with every rank at the same step; needs `python3.12 bench/validation/ranks_validation.py` with a hang",
    ("GD701", 0): _NOT_SEEN.format("a hardware, thermal or power-brake slowdown"),
    ("GD702", 0): _NOT_SEEN.format("a PCIe link below its maximum generation or width"),
    ("GD703", 0): "no recorded run shared its GPU; needs two zoo jobs started on one H200 (validate_examples.py runs one at a time)",
    ("GD704", 0): _NOT_SEEN.format("uncorrected ECC errors or pending row remaps"),
}


@cache
def _catalog_rules() -> tuple[Rule, ...]:
    return tuple(load_catalog())


def _blocks() -> Iterator[tuple[Rule, int, When]]:
    for rule in _catalog_rules():
        for index, when in enumerate(rule.whens):
            if when.source in CASE_SOURCES:
                yield rule, index, when


@cache
def _cases(code: str) -> dict[str, dict[str, Any]]:
    path = CASES / f"{code}.json"
    if not path.exists():
        return {}
    loaded: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return loaded


def _evaluate(rule: Rule, when: When, facts: Mapping[str, Any], location: Mapping[str, Any]) -> Any:
    """The block's condition on a fact set, with the engine's merge order (facts, location, options)."""
    env = {**{k: v for k, v in facts.items() if v is not None}, **location, **DEFAULT_OPTIONS, **rule.options}
    return when.condition.evaluate(env)


BLOCKS = list(_blocks())


@pytest.mark.parametrize(("rule", "index", "when"), BLOCKS, ids=[f"{r.code}[{i}]-{w.source.value}" for r, i, w in BLOCKS])
def test_block_fires_on_its_recorded_case(rule: Rule, index: int, when: When) -> None:
    case = _cases(rule.code).get(str(index))
    key = (rule.code, index)
    if case is None:
        assert key in NO_CASE, (
            f"{rule.code} block {index} ({when.source.value}:{when.scope}, {when.condition.text!r}) has no recorded "
            "case: re-run tests/data/rule_cases/make_cases.py on new recordings, or list it in NO_CASE with a reason")
        return
    assert key not in NO_CASE, f"{rule.code} block {index} has a recorded case now ({case['origin']}): take it off NO_CASE"
    assert (case["source"], case["scope"]) == (when.source.value, when.scope), (
        f"{rule.code} block {index} is {when.source.value}:{when.scope} now, its case was recorded for "
        f"{case['source']}:{case['scope']}: re-run make_cases.py")
    verdict = _evaluate(rule, when, case["facts"], case["location"])
    assert verdict is not MISSING and verdict, (
        f"{rule.code} block {index} ({when.condition.text!r}) no longer fires on its recorded case "
        f"({case['origin']}): got {verdict!r}")
    assert _evaluate(rule, when, {}, {}) is MISSING, "the condition must depend on the recorded facts"


def test_recorded_facts_are_declared_for_their_source_and_scope() -> None:
    stale = []
    for rule in _catalog_rules():
        for index, case in _cases(rule.code).items():
            source, scope = Source(case["source"]), case["scope"]
            stale += [f"{rule.code}[{index}] {name} ({source.value}:{scope})" for name in case["facts"]
                      if name not in LOCATION_NAMES and not REGISTRY.knows(name, source, scope)]
    assert not stale, "recorded facts the registry no longer declares (renamed? re-run make_cases.py): " + ", ".join(stale)


def test_every_case_file_belongs_to_a_live_or_trace_block() -> None:
    blocks = {(r.code, str(i)) for r, i, _ in BLOCKS}
    files = sorted(CASES.glob("GD*.json"))
    assert files, f"no recorded cases under {CASES}"
    orphans = [f"{path.stem}[{index}]" for path in files for index in _cases(path.stem) if (path.stem, index) not in blocks]
    assert not orphans, f"cases of blocks that no longer exist (re-run make_cases.py): {', '.join(orphans)}"


def test_no_case_list_names_only_existing_blocks() -> None:
    blocks = {(r.code, i) for r, i, _ in BLOCKS}
    stale = sorted(set(NO_CASE) - blocks)
    assert not stale, f"NO_CASE lists blocks that are no live/trace block now: {stale}"
