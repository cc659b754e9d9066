"""GEMMs on a dimension that is not a multiple of 8 (GD211), and what compile's estimate makes of them.

The traces are 2-step torch.profiler recordings of GPT-2 small (the Hugging Face model, batch 8 × 1024)
on an H200, from the ``remaining_gains_probe.py`` probe (docs/bench-history.md); ``probe.json`` beside them holds the
throughput that run measured for each variant, which the estimates are checked against here.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

import gpudoctor.trace.kernels as kn
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Finding, Location, Source
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

RUN = Path(__file__).resolve().parents[2] / "tests" / "data" / "gpu_runs" / "h200-remaining-gains"
TRACES = RUN / "traces"


@cache
def _values(variant: str) -> dict[str, object]:
    return dict(compute_rank_metrics(load_trace(TRACES / f"hf_{variant}.json.gz")).values)


def _findings(variant: str) -> dict[str, Finding]:
    facts = FactSet("rank", Source.TRACE, _values(variant), Location(rank=0))
    return {f.code: f for f in evaluate(load_catalog(), [facts], [Source.TRACE]).findings}


def _measured(before: str, after: str) -> float:
    rows = {r["name"]: r for r in json.loads((RUN / "probe.json").read_text())["hf"]}
    return float(rows[after]["steps_per_s"]) / float(rows[before]["steps_per_s"])


@pytest.mark.parametrize(("name", "unaligned"), [
    ("void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_tn_align1>(cutlass_75_tensorop_bf16_s1688gemm", True),
    ("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32_stage4_warpsize2x2x1_tensor16x8x16_aligna2_alignc2", True),
    ("void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_tn_align8>(Params)", False),
    ("nvjet_sm90_tst_192x128_64x5_1x2_h_bz_coopB_TNT", False),
    # fp32 on CUDA cores needs no 16-byte alignment: its align1 kernels are the normal ones
    ("void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nn_align1>(cutlass_80_simt_sgemm_256x128_8x4_nn_align1::Params)", False),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >", False),
])
def test_unaligned_16bit_gemm_names(name: str, unaligned: bool) -> None:
    assert kn.is_unaligned_lowp_gemm(name) is unaligned


def test_vocabulary_50257_is_found_with_its_cost() -> None:
    v = _values("bf16_v50257")
    # the LM head's three GEMMs (forward, both backward) fall back to cutlass_75 …_align1 kernels
    assert 12.0 < float(v["gemm_lowp_unaligned_ms_per_step"]) < 20.0  # type: ignore[arg-type]
    finding = _findings("bf16_v50257")["GD211"]
    assert "not a multiple of 8" in finding.message and finding.impact is not None
    assert finding.impact.cost_ms_per_step == pytest.approx(v["gemm_lowp_unaligned_ms_per_step"])
    measured = _measured("bf16_v50257", "bf16_v50304")          # 1.29× on the H200
    assert finding.impact.est_speedup_low <= measured <= finding.impact.est_speedup_high
    assert finding.severity.value == "warning"


def test_padded_vocabulary_and_fp32_and_compiled_runs_are_quiet() -> None:
    assert _values("bf16_v50304")["gemm_lowp_unaligned_ms_per_step"] == 0.0
    assert "GD211" not in _findings("bf16_v50304")
    assert _values("fp32_v50257")["gemm_lowp_unaligned_ms_per_step"] == 0.0   # fp32: CUDA-core kernels
    assert "GD211" not in _findings("fp32_v50257")
    compiled = _findings("bf16c_v50257")   # Inductor pads the head GEMMs itself
    assert "GD211" not in compiled and "GD403" not in compiled


@pytest.mark.parametrize(("eager", "compiled"), [("bf16_v50257", "bf16c_v50257")])
def test_compile_estimate_counts_the_padding_and_the_host(eager: str, compiled: str) -> None:
    finding = _findings(eager)["GD403"]
    impact = finding.impact
    assert impact is not None
    measured = _measured(eager, compiled)                      # 2.27× on the H200
    assert impact.est_speedup_low <= measured <= impact.est_speedup_high
    assert "unaligned 16-bit GEMMs" in impact.basis and "after the fix" in impact.basis
    # compile ranks above padding alone, and measured faster than it (2.27× > 1.29×)
    assert impact.est_speedup > _findings(eager)["GD211"].impact.est_speedup  # type: ignore[union-attr]
    # the host floor falls with the fused launches: without that the estimate would stop at the
    # eager host floor (58.2 / 37.9 ms = 1.54×), under what compile measured
    v = _values(eager)
    assert impact.est_speedup_high > float(v["step_time_ms"]) / float(v["host_floor_ms"])  # type: ignore[arg-type]
