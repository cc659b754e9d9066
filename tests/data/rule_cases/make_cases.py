"""Extract one recorded case per live/trace ``[[when]]`` block of every rule into <CODE>.json.

Why this exists: ruff keeps a fixture per rule that shows the rule firing; a diagnostic rule needs
the same, and its fixture must be measured, not invented. A case here is a fact set recorded from a
real run on which the block's condition is true:

- trace blocks: the fact sets (rank, run context, straggler comparison) of the real traces in
  ``/work/shared/traces`` (H200 runs and HTA's / the TensorBoard plugin's public traces), the
  2-rank H200 traces under ``tests/data/gpu_runs/*/traces`` and the recorded CPU traces in
  ``tests/data/trace``, analysed by gpudoctor's own trace pipeline;
- live blocks: the ``evidence`` of live findings in the JSON reports of real H200 runs under
  ``tests/data/gpu_runs/**`` (the facts the condition read, as the report recorded them; thresholds left
  out, the rule's current options apply); failing that, the live fact sets rebuilt from the last
  samples those reports keep (``gpus``, ``process``, ``shm``, ``stacks``, ``steps``) with
  :func:`gpudoctor.live.facts.build_factsets`.

For each block the first recorded fact set on which it is the first block of its rule to fire is
kept (the engine reports that block there); failing that, the first on which it fires at all. Run
from the repository root::

    .venv/bin/python tests/data/rule_cases/make_cases.py

and commit the JSON: ``{block id: case}`` per rule, keyed by each ``[[when]]`` block's ``id``.
``tests/core/test_rule_cases.py`` evaluates every case; a block with no case says why in its rule
file (``no_case = "..."``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudoctor.agent.protocol import from_wire
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.catalog import Catalog
from gpudoctor.catalog.expr import MISSING, ExpressionError
from gpudoctor.catalog.impact import DEFAULT_OPTIONS
from gpudoctor.catalog.rulefile import CASE_SOURCES, Rule, When
from gpudoctor.live.facts import build_factsets
from gpudoctor.live.samples import GpuSample, ProcessSample, ShmSample, StackSample, StepStats, WorkerSample
from gpudoctor.model import FactSet, Source
from gpudoctor.trace.analysis import analyze_trace_files

REPO = Path(__file__).resolve().parents[3]
OUT = Path(__file__).resolve().parent
SHARED_TRACES = REPO.parent / "shared" / "traces"
BENCH_RESULTS = REPO / "tests" / "data" / "gpu_runs"
RECORDED_TRACES = REPO / "tests" / "data" / "trace"


@dataclass(frozen=True)
class Recorded:
    """One recorded fact set: what a condition sees, and where it was recorded."""

    source: Source
    scope: str
    facts: dict[str, Any]
    location: dict[str, Any]
    origin: str


def options_for(rule: Rule) -> dict[str, Any]:
    """What the engine merges under a rule's facts (no user overrides)."""
    return {**DEFAULT_OPTIONS, **rule.options}


def fires(when: When, facts: Mapping[str, Any], location: Mapping[str, Any], options: Mapping[str, Any]) -> bool:
    """Whether ``when``'s condition is true on a recorded fact set, as the engine evaluates it."""
    env = {**{k: v for k, v in facts.items() if v is not None}, **location, **options}
    try:
        verdict = when.condition.evaluate(env)
    except ExpressionError:
        return False
    return verdict is not MISSING and bool(verdict)


def _shown(path: Path) -> str:
    """A path as the case's origin: relative to the repository, or ``shared/…`` for the shared traces."""
    for base in (REPO, REPO.parent):
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
    return str(path)


def trace_sets() -> list[Path]:
    """Every recorded trace set: a directory of one job's rank traces, or a single trace file."""
    files = sorted({*SHARED_TRACES.glob("**/*.json.gz"), *BENCH_RESULTS.glob("*/traces/**/*.json.gz"),
                    *RECORDED_TRACES.glob("*.json.gz")})
    by_dir: dict[Path, list[Path]] = {}
    for path in files:
        by_dir.setdefault(path.parent, []).append(path)
    sets: list[Path] = []
    for folder, members in sorted(by_dir.items()):
        if len(members) >= 2 and all("rank" in m.name.lower() for m in members):
            sets.append(folder)  # one job's ranks: analysed together (straggler facts)
        else:
            sets.extend(members)
    return sets


def recorded_trace_factsets() -> Iterator[Recorded]:
    """Every fact set the trace pipeline produces from the recorded traces, run context merged in."""
    for path in trace_sets():
        facts = analyze_trace_files([path], jobs=1)
        context = {k: v for k, v in facts.run.values.items() if v is not None}
        for fs in [*facts.factsets, facts.run, *facts.straggler]:
            yield _recorded(fs, context, _shown(path))


def _recorded(fs: FactSet, context: Mapping[str, Any], origin: str) -> Recorded:
    values = {**context, **{k: _plain(v) for k, v in fs.values.items() if v is not None}}
    where = fs.location.to_dict()
    if "rank" in where:
        origin = f"{origin} rank {where['rank']}"
    return Recorded(fs.source, fs.scope, values, where, origin)


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def recorded_live_evidence() -> Iterator[tuple[str, Recorded]]:
    """(rule code, evidence) of every live finding in the JSON reports under tests/data/gpu_runs."""
    for path in sorted(BENCH_RESULTS.glob("**/*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for pointer, finding in _findings(document, ""):
            if finding.get("source") != Source.LIVE.value:
                continue
            evidence = {e["name"]: e["value"] for e in finding["evidence"] if not e.get("threshold")}
            where = {k: v for k, v in (finding.get("location") or {}).items() if v is not None}
            yield str(finding["code"]), Recorded(Source.LIVE, "", evidence, where, f"{_shown(path)} {pointer}")


def recorded_live_factsets() -> Iterator[Recorded]:
    """The live fact sets of every attach/run report under tests/data/gpu_runs, rebuilt from its last samples."""
    for path in sorted(BENCH_RESULTS.glob("**/*.json")):
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for pointer, report in _live_reports(document, ""):
            for fs in live_factsets(report):
                yield _recorded(fs, {}, f"{_shown(path)} {pointer} (last samples)")


def live_factsets(report: Mapping[str, Any]) -> list[FactSet]:
    """What the live session's fact builder makes of a report's recorded samples (one window)."""
    raw_proc, raw_shm, raw_stacks, raw_steps = (report.get(k) for k in ("process", "shm", "stacks", "steps"))
    proc = None
    if raw_proc:
        workers = tuple(WorkerSample(**w) for w in raw_proc.get("workers") or ())
        proc = from_wire(ProcessSample, {**raw_proc, "workers": ()})
        proc = ProcessSample(**{**proc.__dict__, "workers": workers})
    gpus = [[from_wire(GpuSample, g)] for g in report.get("gpus") or ()]
    return build_factsets(
        int(report.get("target_pid") or (raw_proc or {}).get("pid") or 0), gpus, proc,
        from_wire(ShmSample, raw_shm) if raw_shm else None,
        from_wire(StackSample, raw_stacks) if raw_stacks else None,
        from_wire(StepStats, _known(StepStats, raw_steps)) if raw_steps else None,
        float(report.get("elapsed_s") or 0.0))


def _known(cls: type, raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` without what the report added beside the agent's fields (``source``, ``unit``, ``step_ms``)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in raw.items() if k in names}


def _live_reports(node: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("command") in ("attach", "run") and "process" in node and "gpus" in node:
            yield pointer, node
            return
        for key, value in node.items():
            yield from _live_reports(value, f"{pointer}.{key}" if pointer else key)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _live_reports(value, f"{pointer}[{index}]")


def _findings(node: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if {"code", "source", "evidence"} <= node.keys() and isinstance(node["evidence"], list):
            yield pointer, node
            return
        for key, value in node.items():
            yield from _findings(value, f"{pointer}.{key}" if pointer else key)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _findings(value, f"{pointer}[{index}]")


def _first_to_fire(rule: Rule, index: int, rec: Recorded, options: Mapping[str, Any]) -> bool:
    """Whether no earlier block of the rule for the same source and scope fires on ``rec``."""
    when = rule.whens[index]
    return not any(fires(w, rec.facts, rec.location, options) for w in rule.whens[:index]
                   if w.source == when.source and w.scope == when.scope)


def build_cases(catalog: Catalog) -> dict[str, dict[str, dict[str, Any]]]:
    """{rule code: {block id: case}} for every live/trace block some recording fires."""
    trace_recs = list(recorded_trace_factsets())
    live_recs = list(recorded_live_evidence())
    live_sets = list(recorded_live_factsets())
    cases: dict[str, dict[str, dict[str, Any]]] = {}
    for rule in catalog:
        options = options_for(rule)
        for index, when in enumerate(rule.whens):
            if when.source not in CASE_SOURCES:
                continue
            if when.source is Source.TRACE:
                pool = [r for r in trace_recs if r.scope == when.scope]
            else:
                pool = [r for code, r in live_recs if code == rule.code]
            firing = [r for r in pool if fires(when, r.facts, r.location, options)]
            if not firing and when.source is Source.LIVE:
                firing = [r for r in live_sets if r.scope == when.scope and fires(when, r.facts, r.location, options)]
            if not firing:
                continue
            chosen = next((r for r in firing if _first_to_fire(rule, index, r, options)), firing[0])
            cases.setdefault(rule.code, {})[when.id] = {
                "source": when.source.value, "scope": when.scope, "origin": chosen.origin,
                "location": chosen.location, "facts": dict(sorted(chosen.facts.items())),
            }
    return cases


def main() -> int:
    cases = build_cases(load_catalog())
    for old in OUT.glob("GD*.json"):
        if old.stem not in cases:
            old.unlink()
    for code, blocks in sorted(cases.items()):
        text = json.dumps(blocks, indent=1, sort_keys=False, ensure_ascii=False, allow_nan=False)
        (OUT / f"{code}.json").write_text(text + "\n", encoding="utf-8")
    covered = sum(len(b) for b in cases.values())
    print(f"wrote {len(cases)} rule files, {covered} blocks with a recorded case", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
