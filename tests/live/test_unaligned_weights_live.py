"""GD211 live: the agent's unaligned weight shapes give an info finding in a model that is not compiled."""

from __future__ import annotations

from live_helpers import step_stats

from gpudoctor.agent.protocol import StepStats, from_wire, to_wire
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.live.facts import build_factsets
from gpudoctor.model import Severity, Source

CATALOG = load_catalog([])


def _steps(shapes: tuple[str, ...] | None, graphs: int | None = None) -> StepStats:
    return step_stats(unaligned_weight_shapes=shapes, unique_graphs=graphs)


def _gd211(steps: StepStats) -> list[tuple[str, Severity, str]]:
    found = evaluate(CATALOG, build_factsets(10, [], None, None, None, steps, 30.0), [Source.LIVE]).findings
    return [(f.code, f.severity, f.message) for f in found if f.code == "GD211"]


def test_an_eager_model_with_a_50257_token_head_gets_an_info_finding_naming_the_shape() -> None:
    [(code, severity, message)] = _gd211(_steps(("50257x768",)))
    assert severity is Severity.INFO and "50257x768" in message


def test_aligned_weights_a_compiled_model_or_no_optimizer_step_yet_give_nothing() -> None:
    assert _gd211(_steps(())) == []
    assert _gd211(_steps(("50257x768",), graphs=3)) == []  # Inductor pads these GEMMs itself
    assert _gd211(_steps(None)) == []


def test_the_shapes_cross_the_wire_as_a_tuple() -> None:
    wire = to_wire(_steps(("50257x768", "30522x768")))
    assert from_wire(StepStats, dict(wire)).unaligned_weight_shapes == ("50257x768", "30522x768")
