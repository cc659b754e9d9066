"""Kernel-name rules on names taken from the real H200 / V100 / A100 traces."""

from __future__ import annotations

import pytest

import gpudoctor.trace.kernels as kn

CASES = [
    ("sm80_xmma_gemm_f32f32_f32f32_f32_nt_n_tilesize32x32x8_stage3_warpsize1x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
     kn.FP32_SIMT),
    ("void cudnn::winograd_nonfused::winogradWgradData4x4<float, float>(cudnn::winograd_nonfused::WinogradDataParams<float, float>)",
     kn.FP32_SIMT),
    ("void fft2d_r2c_32x32<float, false, 0u, false>(float2*, float const*, int, int, int, int, int, int, int, int, int)",
     kn.FP32_SIMT),
    ("sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize256x64x32_warpgroupsize1x1x1_g1_execute",
     kn.TF32),
    ("sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1",
     kn.LOW_PRECISION),
    ("void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(x)",
     kn.LOW_PRECISION),
    ("nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNT", kn.LOW_PRECISION),
    # SDPA with fp32 inputs takes the memory-efficient kernel in fp32 (nanoGPT fp32 on the H200);
    # with bf16 inputs the flash kernels run on tensor cores
    ("fmha_cutlassF_f32_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<float, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
     kn.FP32_SIMT),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
     kn.LOW_PRECISION),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int)", None),
    ("void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float)", None),
]


@pytest.mark.parametrize(("name", "expected"), CASES)
def test_gemm_precision(name: str, expected: str | None) -> None:
    assert kn.gemm_precision(name) == expected


def test_hta_kernel_types() -> None:
    assert kn.hta_kernel_type("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == kn.COMMUNICATION
    assert kn.hta_kernel_type("Memcpy HtoD (Pageable -> Device)") == kn.MEMORY
    assert kn.hta_kernel_type("Memset (Device)") == kn.MEMORY
    assert kn.hta_kernel_type("triton_poi_fused_mul_0") == kn.COMPUTATION


def test_layout_and_multi_tensor() -> None:
    assert kn.is_layout_transform("void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16>(x)")
    assert not kn.is_layout_transform("sm90_xmma_fprop_implicit_gemm_bf16bf16")
    assert kn.is_multi_tensor("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<T>(x)")
