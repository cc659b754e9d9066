"""One formatter for the numbers a person reads (gpudoctor.numbers), and the places that use it."""

from __future__ import annotations

from gpudoctor.catalog.expr import Template
from gpudoctor.catalog.impact import estimate, parse_impact
from gpudoctor.model import Impact
from gpudoctor.numbers import count, formatted, gains_nothing, plain, speedup


def test_counts_never_print_as_floats() -> None:
    assert formatted(8.0, ".1f") == "8" and formatted(8.25, ".1f") == "8.2" and formatted(3, ".1f") == "3.0"
    assert Template("{n:.1f} small copies").render({"n": 8.0}) == "8 small copies"
    assert plain(8.0) == "8" and plain(40.0) == "40" and plain(1234.0) == "1,234" and plain(2.76) == "2.76"
    assert count(1, "finding") == "1 finding" and count(3, "finding") == "3 findings"


def test_a_range_whose_ends_print_alike_is_one_value() -> None:
    assert speedup(1.006, 1.0104) == "1.01×" and speedup(1.49, 1.63) == "1.49–1.63×"
    impact = Impact(1.0, 1.0, 1.006, 1.0104, "b", "host")
    assert impact.describe().startswith("est. 1.01× ·")
    assert gains_nothing(1.0, 1.004) and not gains_nothing(1.0, 1.006)


def test_cost_share_uses_the_verdicts_step() -> None:
    """The verdict divides the profiled step: GD102's cost of the same 125.4 ms must read 84%, not 88%."""
    model = parse_impact({"side": "host", "cost_ms": "wait_ms", "saved_ms_low": "wait_ms",
                          "saved_ms_high": "wait_ms", "basis": "b"})
    verdict = estimate(model, {"wait_ms": 125.4, "step_time_ms": 141.9, "profiled_step_ms": 148.9})
    assert verdict.impact is not None and verdict.impact.cost_pct_of_step == 84.2


def test_no_estimate_note_says_it_in_words_once() -> None:
    model = parse_impact({"side": "host", "cost_ms": "input_gpu_idle_ms_per_step",
                          "saved_ms_low": "input_gpu_idle_ms_per_step", "saved_ms_high": "input_gpu_idle_ms_per_step",
                          "basis": "b"})
    note = estimate(model, {"step_time_ms": 100.0}).note
    assert not note.startswith("no estimate") and "input_gpu_idle_ms_per_step" not in note
    assert note == "needs GPU idle per step while the host loads the next batch"
