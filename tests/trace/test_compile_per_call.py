"""GD401 counts compiled graphs per call of each compiled function, not per optimizer step.

Real traces: the H200 ``compile_break`` trace (``.item()`` + ``print`` in forward: three graphs per
call) and two CPU traces recorded with torch.profiler (tests/data/trace/record_compiled_accumulation.py)
of a compiled MLP called 4× per optimizer step (gradient accumulation), with and without a break.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Location, Source
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


def _gd401(path: Path) -> list[str]:
    """GD401's messages on the rank fact set of one trace (the engine, without the report facade)."""
    values = compute_rank_metrics(load_trace(path)).values
    facts = FactSet("rank", Source.TRACE, values, Location(rank=0))
    result = evaluate(load_catalog(), [facts], [Source.TRACE])
    return [f.message for f in result.findings if f.code == "GD401"]


def test_accumulated_micro_batches_are_calls_not_breaks() -> None:
    values = compute_rank_metrics(load_trace(DATA / "compiled_accumulation_cpu.json.gz")).values
    assert values["compiled_graphs_per_step"] == 4.0  # what the old rule counted as 4 graphs
    assert values["compiled_calls_per_step"] == 4.0
    assert values["compiled_graphs_per_call"] == 1.0
    assert _gd401(DATA / "compiled_accumulation_cpu.json.gz") == []


def test_a_break_under_accumulation_still_fires() -> None:
    path = DATA / "compiled_accumulation_break_cpu.json.gz"
    values = compute_rank_metrics(load_trace(path)).values
    assert values["compiled_calls_per_step"] == 4.0
    assert values["compiled_graphs_per_call"] == 2.0
    messages = _gd401(path)
    assert len(messages) == 1 and "2 compiled graphs per call" in messages[0]


def test_real_graph_breaks_on_h200_still_fire(trace_file: Callable[[str], Path]) -> None:
    path = trace_file("h200/compile_break.json.gz")
    values = compute_rank_metrics(load_trace(path)).values
    assert (values["compiled_calls_per_step"], values["compiled_graphs_per_call"]) == (1.0, 3.0)
    messages = _gd401(path)
    assert len(messages) == 1 and "3 compiled graphs per call" in messages[0]
