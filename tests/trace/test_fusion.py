"""Fusible, cast and launch-gap time per step on the real H200 traces (gpudoctor.trace.fusion)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import gpudoctor.trace.kernels as kn
from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.model import FactSet, Finding, Location, Source
from gpudoctor.trace.metrics import compute_rank_metrics
from gpudoctor.trace.reader import load_trace

#: names taken verbatim (cut) from the H200 and public traces
FUSION_CASES = [
    ("void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>(torch::headeronly::detail", kn.FUSE_NORM),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128, true, 1, true>(cudnnTensorStruct, float const*", kn.FUSE_NORM),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::WelfordOps<float, float, int", kn.FUSE_NORM),
    ("void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*", kn.FUSE_SOFTMAX),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps<c10::BFloat16", kn.FUSE_REDUCE),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)", kn.FUSE_CAST),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}, "
     "at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >", kn.FUSE_CAST),
    ("void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*", kn.FUSE_COPY),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >", kn.FUSE_ELEMENTWISE),
    ("triton_poi_fused_addmm_relu_threshold_backward_0", None),
    ("sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1", None),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, false, true>", None),
    ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::Tensor", None),
    ("void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, at::native::", None),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", None),
    ("Memcpy HtoD (Pageable -> Device)", None),
    ("void splitKreduce_kernel<float, float, float, float, true, false, false>(cublasSplitKParams<float>", None),
]


@pytest.mark.parametrize(("name", "expected"), FUSION_CASES)
def test_fusion_class(name: str, expected: str | None) -> None:
    assert kn.fusion_class(name) == expected


def _values(path: Path) -> dict[str, object]:
    return compute_rank_metrics(load_trace(path)).values


def test_eager_bf16_resnet_is_mostly_fusible(trace_file: Callable[[str], Path]) -> None:
    v = _values(trace_file("h200/resnet_bf16.json.gz"))
    assert v["compiled_region_present"] is False
    # batch-norm forward/backward in bf16 NCHW dominates this resnet18 (the top kernel is
    # batch_norm_backward_kernel, 36% of kernel time): most of the GPU time is memory-bound
    assert 50.0 <= v["fusible_pct_of_gpu"] <= 70.0
    assert v["fusible_norm_ms_per_step"] > v["fusible_elementwise_ms_per_step"] > 0.5
    assert v["fusible_ms_per_step"] == pytest.approx(
        v["fusible_norm_ms_per_step"] + v["fusible_elementwise_ms_per_step"] + v["fusible_reduce_ms_per_step"]
        + v["fusible_copy_ms_per_step"], abs=0.01)
    # autocast casts the conv/linear weights every forward and their gradients back in backward:
    # 21 convs + 1 linear → 23 + 23 casts per step (4 profiled steps), small next to the convs
    assert v["autocast_cast_kernels_per_step"] == 46.0
    assert 0 < v["autocast_cast_pct_of_gpu"] < 2.0
    assert v["kernel_sequence_static"] is True
    assert v["launch_gap_ms_per_step"] < 0.1  # GPU-bound: the queue never runs dry


def test_fp32_resnet_has_no_autocast_casts(trace_file: Callable[[str], Path]) -> None:
    v = _values(trace_file("h200/resnet_fp32.json.gz"))
    assert v["autocast_cast_kernels_per_step"] == 0.0 and v["cast_ms_per_step"] == 0.0
    assert 15.0 <= v["fusible_pct_of_gpu"] <= 30.0  # fp32 convs are slow: the fusible share is smaller


def test_compiled_model_is_seen_as_compiled(trace_file: Callable[[str], Path]) -> None:
    v = _values(trace_file("h200/compile_break.json.gz"))
    assert v["compiled_region_present"] is True
    assert v["compiled_kernel_pct_of_gpu"] > 0
    # a tiny MLP: the host cannot launch kernels as fast as the GPU runs them
    assert v["launch_gap_ms_per_step"] > v["gpu_kernel_ms_per_step"]


# ---- the rules that read these facts: GD403 (compile), GD303 (CUDA graphs), GD210 (autocast casts) ----
def _findings(path: Path, options: dict[str, dict[str, object]] | None = None) -> dict[str, Finding]:
    facts = FactSet("rank", Source.TRACE, dict(_values(path)), Location(rank=0))
    result = evaluate(load_catalog(), [facts], [Source.TRACE], options)
    return {f.code: f for f in result.findings}


def test_compile_rule_on_eager_bf16_resnet(trace_file: Callable[[str], Path]) -> None:
    path = trace_file("h200/resnet_bf16.json.gz")
    finding = _findings(path)["GD403"]
    assert "59% of GPU time" in finding.message and "nothing in the trace is compiled" in finding.message
    impact = finding.impact
    assert impact is not None and impact.side == "gpu"
    values = _values(path)
    # the NCHW bf16 resnet18 pays layout transforms too: compile's layout optimization removes them
    assert values["layout_transform_ms_per_step"] > 1.0
    assert impact.cost_ms_per_step == pytest.approx(values["fusible_ms_per_step"] + values["layout_transform_ms_per_step"]
                                                    + values["gemm_lowp_unaligned_ms_per_step"], abs=0.002)
    assert "NCHW↔NHWC transforms" in impact.basis
    # 13.6 ms/step fusible (12.3 of it batch norm × 0.4–0.65, the rest × 0.75–1.0) + the transforms
    # × 0.7–1.0 on a ~20 ms step, bounded by the host's floor once the fused launches are gone
    assert 1.2 < impact.est_speedup_low < impact.est_speedup_high < 2.5


def test_compile_rule_quiet_when_compiled(trace_file: Callable[[str], Path]) -> None:
    assert "GD403" not in _findings(trace_file("h200/compile_break.json.gz"))
    assert "GD403" not in _findings(trace_file("h200/loader_bound.json.gz"))  # 16% fusible: below 20%


def test_launch_bound_static_step_gets_cuda_graph_advice(trace_file: Callable[[str], Path]) -> None:
    finding = _findings(trace_file("h200/compile_break.json.gz"))["GD303"]
    assert "CUDA graph" in finding.message and "same 27 kernels" in finding.message
    assert finding.impact is not None and finding.impact.side == "host"
    assert finding.impact.cost_ms_per_step == pytest.approx(2.869, abs=0.01)
    assert "GD303" not in _findings(trace_file("h200/resnet_bf16.json.gz"))  # GPU-bound


def test_autocast_cast_rule(trace_file: Callable[[str], Path]) -> None:
    path = trace_file("h200/resnet_bf16.json.gz")
    assert "GD210" not in _findings(path)  # trainable weights cast once per forward: 0.7% of GPU time
    assert _values(path)["autocast_grad_cast_kernels_per_step"] == 23.0  # 23 weights, each gradient cast back
    finding = _findings(path, {"GD210": {"min_autocast_cast_pct": 0.5}})["GD210"]
    # trainable weights: their fp32 master copy is cast every forward — info, no estimate of its own
    assert "46 kernels" in finding.message and "trainable" in finding.message
    assert finding.impact is None and "GD403" in (finding.impact_note or "")
    assert finding.severity.value == "info"
    # the same casts with no gradient cast back (frozen weights: the case a bf16 copy fixes) carry the estimate
    frozen = _findings(path, {"GD210": {"min_autocast_cast_pct": 0.5, "min_trainable_share": 2.0}})["GD210"]
    assert frozen.impact is not None and frozen.impact.cost_ms_per_step == pytest.approx(0.16, abs=0.005)
    assert frozen.severity.value == "info"  # costs under 2% of the step: never above info


def test_compile_estimate_follows_its_options(trace_file: Callable[[str], Path]) -> None:
    path = trace_file("h200/resnet_bf16.json.gz")
    narrow = _findings(path, {"GD403": {"norm_saving_low": 0.5, "norm_saving_high": 0.5,
                                        "pointwise_saving_low": 0.85, "pointwise_saving_high": 0.85,
                                        "weight_cast_saving_low": 0.3, "weight_cast_saving_high": 0.3,
                                        "layout_saving_low": 0.75, "layout_saving_high": 0.75,
                                        "padding_saving_low": 0.8, "padding_saving_high": 0.8}})["GD403"].impact
    wide = _findings(path)["GD403"].impact
    assert narrow is not None and wide is not None
    assert narrow.est_speedup_low == narrow.est_speedup_high
    assert wide.est_speedup_low < narrow.est_speedup_low < wide.est_speedup_high
