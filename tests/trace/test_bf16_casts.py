"""GD201's bf16 estimate counts the casts autocast adds in an eager transformer (issue 35, item 2).

The traces are the H200 Hugging Face GPT-2 ``Trainer`` runs of the ``remaining_gains_probe.py`` probe (docs/bench-history.md)
(batch 8 × 1024, vocabulary 50257); ``probe.json`` holds the steps/s each variant measured.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Location, Source
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

RUN = Path(__file__).resolve().parents[2] / "tests" / "data" / "gpu_runs" / "h200-remaining-gains"


def _rate(name: str) -> float:
    return float(next(r for r in json.loads((RUN / "probe.json").read_text())["hf"] if r["name"] == name)["steps_per_s"])


def _gd201(values: dict[str, object]) -> tuple[float, float]:
    facts = FactSet("rank", Source.TRACE, values, Location(rank=0))
    finding = next(f for f in evaluate(load_catalog(), [facts], [Source.TRACE]).findings if f.code == "GD201")
    assert finding.impact is not None
    return finding.impact.est_speedup_low, finding.impact.est_speedup_high


def test_bf16_estimate_brackets_the_measured_gain_with_the_casts_counted() -> None:
    values = dict(compute_rank_metrics(load_trace(RUN / "traces" / "hf_fp32_v50257.json.gz")).values)
    low, high = _gd201(values)
    measured = _rate("bf16_v50257") / _rate("fp32_v50257")
    assert low <= measured <= high
    # without the eager memory-bound kernels (where the casts land) the low end is the old, floor-bound one
    assert _gd201({**values, "fusible_ms_per_step": 0.0})[0] > measured
    # a compiled model's casts are fused: nothing is subtracted
    assert _gd201({**values, "compiled_region_present": True})[0] > low
