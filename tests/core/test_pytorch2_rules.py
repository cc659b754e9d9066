"""The PyTorch 2.x advice rules load with the impact models their files document (issue 12, item 5)."""

from __future__ import annotations

import pytest

from gpudoctor.catalog import load_catalog

#: code → per [[when]] block (source, scope, impact side), in file order
EXPECTED = {
    "GD403": [("trace", "rank", "gpu"), ("live", "job", "none"), ("static", "python.training_loop", "none")],
    "GD303": [("trace", "rank", "none"), ("trace", "rank", "host"), ("trace", "rank", "host")],
    "GD402": [("trace", "rank", "host"), ("trace", "rank", "none"), ("live", "job", "none"), ("live", "job", "none")],
    "GD210": [("trace", "rank", "none"), ("trace", "rank", "gpu")],
    "GD211": [("trace", "rank", "gpu"), ("static", "python.unaligned_dim", "none"),
              ("live", "job", "none")],
    "GD806": [("env", "machine", "none")],
}
#: options that must feed the estimate (tuning them must change it)
SAVING_OPTIONS = {"GD403": ["norm_saving_low", "norm_saving_high", "pointwise_saving_low", "pointwise_saving_high",
                            "weight_cast_saving_low", "weight_cast_saving_high", "layout_saving_low",
                            "layout_saving_high", "padding_saving_low", "padding_saving_high", "fused_launch_share"],
                  "GD211": ["padding_saving_low", "padding_saving_high"],
                  "GD303": ["graph_saving_low", "graph_saving_high"],
                  "GD402": ["recompile_saving_low", "recompile_saving_high"],
                  "GD210": ["cast_saving_low", "cast_saving_high"]}


@pytest.mark.parametrize("code", sorted(EXPECTED))
def test_blocks_and_impact_sides(code: str) -> None:
    rule = load_catalog().get(code)
    assert rule is not None
    got = [(w.source.value, w.scope, w.impact.side if w.impact else None) for w in rule.whens]
    assert got == EXPECTED[code]
    for when in rule.whens:
        assert when.impact is not None
        if when.impact.side == "none":
            assert when.impact.why_none, f"{code}: a block without an estimate says why"
    assert rule.sections["Impact"].strip()


@pytest.mark.parametrize("code", sorted(SAVING_OPTIONS))
def test_saving_options_feed_the_estimate(code: str) -> None:
    rule = load_catalog().get(code)
    assert rule is not None
    first = next((w.impact for w in rule.whens if w.impact is not None and w.impact.side != "none"), None)
    assert first is not None
    for option in SAVING_OPTIONS[code]:
        assert option in rule.options and option in first.names
    assert rule.options[SAVING_OPTIONS[code][0]] < rule.options[SAVING_OPTIONS[code][1]]
