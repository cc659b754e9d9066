"""The fact registry against its producers: every declared fact is emitted, every emitted fact declared.

Two directions, both on real code and data:

- static: the producer module named for each registered fact writes that name somewhere
  (:mod:`gpudoctor.catalog.registry_check` reads the source with ``ast``); a planted fact that no
  producer writes is reported, and so is a dataclass field that is declared but never filled;
- dynamic: analysing every real trace (``/work/shared/traces``, the H200 rank traces under
  ``tests/data/gpu_runs``, the recorded CPU traces), rebuilding the live fact sets of the H200 attach/run
  reports under ``tests/data/gpu_runs`` from their samples, and statically checking every fixture and
  example emits only facts the registry declares for that source and scope;
- docs: ``docs/facts.md`` is the registry rendered (:mod:`gpudoctor.catalog.registry_docs`).

That a rule reading an undeclared fact is refused at load time, naming the rule, is shown by
``tests/core/test_engine.py::test_user_rule_reading_an_unknown_fact_is_refused_with_its_name``.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from gpudoctor.catalog.registry import LOCATION_NAMES, REGISTRY, FactSpec, Registry
from gpudoctor.catalog.registry_check import emitted_names, producer_files, unproduced
from gpudoctor.catalog.registry_docs import COMMAND, markdown
from gpudoctor.model import FactSet, Source
from gpudoctor.static.runner import run_checks
from gpudoctor.trace.analysis import analyze_trace_files
from gpudoctor.trace.facts import straggler_factsets

REPO = Path(__file__).resolve().parents[2]
STATIC_INPUTS = [REPO / "tests" / "data" / "static", REPO / "examples"]


def _make_cases() -> ModuleType:
    """tests/data/rule_cases/make_cases.py, which knows where every recorded trace is."""
    path = REPO / "tests" / "data" / "rule_cases" / "make_cases.py"
    spec = importlib.util.spec_from_file_location("gpudoctor_rule_cases_make", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def _undeclared(factsets: list[FactSet], origin: dict[int, str]) -> list[str]:
    found: dict[tuple[str, str, str], str] = {}
    for fs in factsets:
        for name in fs.values:
            if name not in LOCATION_NAMES and not REGISTRY.knows(name, fs.source, fs.scope):
                found.setdefault((fs.source.value, fs.scope, name), origin.get(id(fs), "?"))
    return [f"{name} ({source}:{scope}, e.g. {where})" for (source, scope, name), where in sorted(found.items())]


# --- the producers emit what the registry declares ------------------------------------------------

def test_every_registered_fact_is_written_by_its_producer() -> None:
    missing = [f"{s.name} ({s.source.value}:{','.join(s.scopes)}, producer {s.producer})" for s in unproduced(REGISTRY)]
    assert not missing, "registered facts their producer never writes: " + "; ".join(missing)


def test_a_planted_fact_that_no_producer_writes_is_reported() -> None:
    planted = FactSpec("gemm_fp8_pct", Source.TRACE, ("rank",), "%", "trace.metrics", "share of GEMM time in fp8")
    registry = Registry([*REGISTRY, planted])
    assert unproduced(registry) == [planted]


def test_a_fact_whose_producer_is_no_module_is_reported() -> None:
    spec = REGISTRY.get("idle_pct", Source.TRACE)
    assert spec is not None
    moved = FactSpec(spec.name, spec.source, spec.scopes, spec.unit, "trace.no_such_module", spec.doc)
    assert unproduced([moved]) == [moved]


def test_a_declared_but_never_filled_field_does_not_count_as_produced(tmp_path: Path) -> None:
    declared = tmp_path / "declared.py"
    declared.write_text("from dataclasses import dataclass\n\n@dataclass\nclass StepStats:\n"
                        "    host_syncs_per_step: float = 0.0\n    h2d_ms_per_step: float | None = None\n")
    names = emitted_names(declared)
    assert not names.emits("host_syncs_per_step") and not names.emits("h2d_ms_per_step")
    filled = tmp_path / "filled.py"
    filled.write_text("def stats(n, syncs):\n    return StepStats(host_syncs_per_step=syncs / n)\n")
    assert emitted_names(filled).emits("host_syncs_per_step")


def test_names_built_from_pieces_count_when_their_constant_parts_match(tmp_path: Path) -> None:
    source = tmp_path / "pieces.py"
    source.write_text('def f(out, name, cls, slug):\n    out[f"stack_{name}_pct"] = 1\n'
                      '    out[f"{cls}_ms_per_step"] = 2\n    out["part_" + slug + "_ms"] = 3\n'
                      '    return {"idle_pct": 4}\n')
    names = emitted_names(source)
    for name in ("stack_data_loading_pct", "gemm_fp32_simt_ms_per_step", "part_idle_host_sync_ms", "idle_pct"):
        assert names.emits(name), name
    for name in ("stack_data_loading_ms", "part_gpu_busy_pct", "idle_ms", "compute_pct"):
        assert not names.emits(name), name


def test_agent_producer_is_the_agent_not_its_wire_format_or_client() -> None:
    files = {p.name for p in producer_files("agent")}
    assert "runtime.py" in files and "hooks.py" in files
    assert "protocol.py" not in files and "client.py" not in files


# --- what real inputs emit is declared -------------------------------------------------------------

@pytest.fixture(scope="module")
def recorded_trace_factsets() -> tuple[list[FactSet], dict[int, str]]:
    make_cases = _make_cases()
    if not make_cases.SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not found at {make_cases.SHARED_TRACES}")
    factsets: list[FactSet] = []
    origin: dict[int, str] = {}
    for path in make_cases.trace_sets():
        facts = analyze_trace_files([path], jobs=1)
        for fs in [*facts.factsets, facts.run, *straggler_factsets(facts.metrics)]:
            factsets.append(fs)
            origin[id(fs)] = make_cases._shown(path)
    return factsets, origin


@pytest.mark.slow
def test_every_fact_the_real_traces_produce_is_declared(
        recorded_trace_factsets: tuple[list[FactSet], dict[int, str]]) -> None:
    factsets, origin = recorded_trace_factsets
    scopes = {fs.scope for fs in factsets}
    assert {"rank", "run", "straggler"} <= scopes, f"the recorded traces should give every trace scope, got {scopes}"
    undeclared = _undeclared(factsets, origin)
    assert not undeclared, "facts the trace pipeline emits that docs/facts.md does not declare: " + "; ".join(undeclared)


def test_every_live_fact_rebuilt_from_recorded_h200_reports_is_declared() -> None:
    make_cases = _make_cases()
    recorded = list(make_cases.recorded_live_factsets())
    assert {"gpu", "job", "run"} <= {r.scope for r in recorded}, "tests/data/gpu_runs should hold live reports"
    factsets = [FactSet(r.scope, r.source, r.facts) for r in recorded]
    origin = {id(fs): r.origin for fs, r in zip(factsets, recorded)}
    undeclared = _undeclared(factsets, origin)
    assert not undeclared, "facts the live fact builder emits that docs/facts.md does not declare: " + "; ".join(undeclared)


def test_every_fact_static_checks_produce_on_fixtures_and_examples_is_declared() -> None:
    run = run_checks([str(p) for p in STATIC_INPUTS], jobs=1)
    assert len({fs.scope for fs in run.factsets}) >= 10, "the fixtures should cover most static scopes"
    origin = {id(fs): fs.location.describe() or fs.scope for fs in run.factsets}
    undeclared = _undeclared(run.factsets, origin)
    assert not undeclared, "facts the static checkers emit that docs/facts.md does not declare: " + "; ".join(undeclared)


# --- docs/facts.md is the registry, rendered --------------------------------------------------------

def test_docs_facts_md_is_generated_from_the_registry() -> None:
    committed = (REPO / "docs" / "facts.md").read_text(encoding="utf-8")
    assert committed == markdown(REGISTRY), f"docs/facts.md is stale: regenerate it with `{COMMAND}`"


def test_docs_facts_md_lists_every_fact_under_each_of_its_scopes() -> None:
    page = markdown(REGISTRY)
    for spec in REGISTRY:
        for scope in spec.scopes:
            section = page.split(f"### `{spec.source.value}` · scope `{scope}` (", 1)
            assert len(section) == 2, f"no table for {spec.source.value}:{scope}"
            table = section[1].split("\n### ", 1)[0]
            assert f"| `{spec.name}` | " in table, f"{spec.name} missing from {spec.source.value}:{scope}"
