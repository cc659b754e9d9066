"""Attention in a trace (GD212): hand-written chains, SDPA's backend, and what the rule makes of them.

The fixtures are real torch.profiler traces (torch 2.13 CPU, 2 profiled steps) of the 2-layer GPT of
``bench/validation/gpt2_train.py``, recorded with

    python bench/validation/gpt2_train.py --cpu --tiny --seq 256 --steps 1 --warmup 1 [--sdpa | --sdpa-math] \
        --profile tests/data/trace/<name>.json.gz --profile-steps 2

(``gpt_handwritten_attention_cpu``: the hand-written ``softmax(q @ k.T * scale)`` with a causal
``masked_fill``; ``gpt_sdpa_cpu``: ``F.scaled_dot_product_attention(..., is_causal=True)``;
``gpt_sdpa_math_cpu``: the same restricted to the math backend). CUDA traces have the same ``aten::``
op structure with other kernels under it.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Finding, Location, Source
from gpudoctor.trace.attention import _backend_of
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"


@cache
def _values(name: str) -> dict[str, object]:
    return dict(compute_rank_metrics(load_trace(DATA / f"{name}.json.gz")).values)


def _findings(name: str) -> dict[str, Finding]:
    facts = FactSet("rank", Source.TRACE, _values(name), Location(rank=0))
    return {f.code: f for f in evaluate(load_catalog(), [facts], [Source.TRACE]).findings}


def test_handwritten_chains_are_one_per_layer_forward_and_backward() -> None:
    v = _values("gpt_handwritten_attention_cpu")
    # two layers: two forward chains and two backward chains per step; the loss's log_softmax is no chain
    assert v["attention_handwritten_chains_per_step"] == 2.0
    assert v["attention_handwritten_backward_chains_per_step"] == 2.0
    assert v["attention_time_basis"].startswith("host ops")  # type: ignore[union-attr]
    total = float(v["attention_handwritten_ms_per_step"])  # type: ignore[arg-type]
    parts = float(v["attention_handwritten_matmul_ms_per_step"]) + float(v["attention_handwritten_other_ms_per_step"])  # type: ignore[arg-type]
    assert total > 0 and abs(total - parts) < 0.01
    assert float(v["attention_handwritten_pct_of_step"]) >= 5.0  # type: ignore[arg-type]
    assert v["sdpa_calls_per_step"] == 0.0 and "sdpa_backend" not in v


def test_handwritten_attention_is_found_with_an_estimate_and_the_fix() -> None:
    finding = _findings("gpt_handwritten_attention_cpu")["GD212"]
    assert "Hand-written attention" in finding.message
    assert finding.impact is not None and finding.impact.est_speedup_low > 1.0
    assert finding.fix is not None and "is_causal=True" in finding.fix.after


def test_sdpa_flash_backend_is_read_and_the_rule_is_quiet() -> None:
    v = _values("gpt_sdpa_cpu")
    assert v["sdpa_backend"] == "flash" and v["sdpa_calls_per_step"] == 2.0
    assert v["attention_handwritten_chains_per_step"] == 0.0 and v["sdpa_math_ms_per_step"] == 0.0
    assert "GD212" not in _findings("gpt_sdpa_cpu")


def test_sdpa_math_fallback_is_its_own_finding_not_a_handwritten_one() -> None:
    v = _values("gpt_sdpa_math_cpu")
    # the math path's softmax sits inside its SDPA op: not a hand-written chain
    assert v["attention_handwritten_chains_per_step"] == 0.0
    assert v["sdpa_backend"] == "math" and float(v["sdpa_math_ms_per_step"]) > 0  # type: ignore[arg-type]
    finding = _findings("gpt_sdpa_math_cpu")["GD212"]
    assert "math fallback" in finding.message and finding.impact is not None


def test_backend_names() -> None:
    assert _backend_of("aten::_scaled_dot_product_flash_attention_backward") == "flash"
    assert _backend_of("aten::_scaled_dot_product_efficient_attention") == "efficient"
    assert _backend_of("aten::_scaled_dot_product_cudnn_attention") == "cudnn"
    assert _backend_of("aten::_scaled_dot_product_attention_math") == "math"
    assert _backend_of("aten::scaled_dot_product_attention") is None
