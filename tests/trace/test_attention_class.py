"""fp32 fused attention is a class of its own: TF32 does not reach it, bf16 swaps it for flash attention."""

from __future__ import annotations

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.throughput import ratios_for
from gpudoctor.model import FactSet, Location, Source
from gpudoctor.trace import kernels as kn
from gpudoctor.trace.partition import _add_gemm

FMHA_F32 = "fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)"
FLASH_BF16 = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t>>"


def test_fp32_fused_attention_is_fp32_matmul_and_attention() -> None:
    fmha = kn.classify(FMHA_F32)
    assert (fmha.precision, fmha.convolution, fmha.fp32_attention) == (kn.FP32_SIMT, False, True)
    assert kn.classify(FLASH_BF16).fp32_attention is False
    acc = dict.fromkeys(("gemm", "gemm_fp32_simt", "gemm_tf32", "gemm_lowp", "matmul_fp32_simt", "conv_fp32_simt",
                         "attention_fp32_simt", "gemm_unknown_matmul", "gemm_unknown_conv", "gemm_lowp_unaligned"), 0.0)
    _add_gemm(acc, kn.classify(FMHA_F32), 100.0)
    _add_gemm(acc, kn.classify("ampere_sgemm_128x64_tn"), 50.0)
    assert acc["matmul_fp32_simt"] == 150.0 and acc["attention_fp32_simt"] == 100.0


def _rank(**values: float) -> dict[str, object]:
    base: dict[str, object] = dict(gemm_time_pct=80.0, gemm_fp32_simt_pct=100.0, gemm_tf32_pct=0.0, gemm_lowp_pct=0.0, gpu_arch_major=9,
                                   step_time_ms=300.0, gpu_busy_ms_per_step=295.0, host_floor_ms=30.0,
                                   gemm_fp32_simt_ms_per_step=200.0, gemm_tf32_ms_per_step=0.0, conv_fp32_simt_ms_per_step=0.0,
                                   compiled_kernel_ms_per_step=0.0, fp32_simt_pct_of_gpu=68.0, matmul_fp32_simt_pct_of_gpu=68.0,
                                   **ratios_for(9))
    base.update(values)
    return base


def _impact(code: str, **values: float) -> tuple[float, float]:
    facts = FactSet("rank", Source.TRACE, _rank(**values), Location(rank=0))
    finding = next(f for f in evaluate(load_catalog(), [facts], [Source.TRACE]).findings if f.code == code)
    assert finding.impact is not None
    return finding.impact.est_speedup_low, finding.impact.est_speedup_high


def test_tf32_estimate_leaves_fp32_attention_out() -> None:
    plain = _impact("GD202", matmul_fp32_simt_ms_per_step=200.0, attention_fp32_simt_ms_per_step=0.0)
    with_attention = _impact("GD202", matmul_fp32_simt_ms_per_step=200.0, attention_fp32_simt_ms_per_step=100.0)
    assert with_attention[1] < plain[1]
    # 100 ms of matmuls × (1 − 1/3 … 1 − 1/6) saved on a 300 ms step
    assert with_attention == pytest.approx((300 / (300 - 100 * (1 - 1 / 3)), 300 / (300 - 100 * (1 - 1 / 6))), abs=0.01)


def test_bf16_estimate_uses_the_attention_ratio() -> None:
    low, high = _impact("GD201", matmul_fp32_simt_ms_per_step=200.0, attention_fp32_simt_ms_per_step=100.0)
    saved_low = 100 * (1 - 1 / 6.0) + 100 * (1 - 1 / 8.0)
    assert low == pytest.approx(300 / (300 - saved_low), abs=0.01)
    assert high > low
