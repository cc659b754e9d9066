"""What a GPU kernel's name says: HTA's kernel type, GEMM/conv precision class, layout transforms.

Why this exists: the trace carries no precision or kernel-family field, but the names do (see
DESIGN.md, "Kernel names that tell precision"). Keeping every name rule here, as plain functions over
strings with one cached result per distinct name, lets the metrics stay free of string handling and
lets tests pin each rule on real kernel names.

What it must not do: look at anything but the name; import anything heavy.
"""

from __future__ import annotations

import re
from functools import lru_cache

# HTA 0.5.0 (hta/utils/utils.py), verbatim, so that compute/non-compute agree with HTA.
_HTA_COMM_RE = re.compile(r"^nccl.*Kernel")
_HTA_MEMORY_RE = re.compile(r"(^Memcpy)|(^Memset)|(^dma)")
_HTA_NOT_COMPUTE_RE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")

COMMUNICATION = "communication"
MEMORY = "memory"
COMPUTATION = "computation"
OTHER = "other"

FP32_SIMT = "fp32_simt"
TF32 = "tf32"
LOW_PRECISION = "lowp"
UNKNOWN = "unknown"

_GEMM_HINTS = ("gemm", "conv", "winograd", "fft2d", "fft_", "nvjet", "s16816", "s1688", "flash_fwd",
               "flash_bwd", "fmha", "dgrad", "wgrad", "fprop", "cublas", "cutlass")
_NOT_GEMM_HINTS = ("elementwise", "nchwtonhwc", "nhwctonchw", "batch_norm", "bn_fw", "bn_bw",
                   "computeoffsets", "splitkreduce", "reduce_kernel")
_LOWP_HINTS = ("bf16", "fp16", "f16f16", "bfloat16", "half", "s16816", "h1688", "h16816", "hmma",
               "nvjet", "flash_fwd", "flash_bwd", "fmha", "e4m3", "e5m2", "fp8", "i8i8", "imma")
_TF32_HINTS = ("tf32", "tfloat32", "tensorop_s1688", "s1688gemm", "s1688fprop", "s1688dgrad",
               "s1688wgrad", "xf32")
_FP32_HINTS = ("ffma", "simt", "sgemm", "winograd", "fft2d", "fft_", "<float", "f32f32", "float,")
_LAYOUT_HINTS = ("nchwtonhwc", "nhwctonchw", "nchw2nhwc", "nhwc2nchw")
_MULTI_TENSOR_HINTS = ("multi_tensor_apply", "fused_adam", "fused_sgd", "_fused_", "fusedadam")


@lru_cache(maxsize=65536)
def hta_kernel_type(name: str) -> str:
    """HTA's ``get_kernel_type``: communication, memory, computation or other."""
    if _HTA_COMM_RE.match(name):
        return COMMUNICATION
    if _HTA_MEMORY_RE.match(name):
        return MEMORY
    if not _HTA_NOT_COMPUTE_RE.match(name):
        return COMPUTATION
    return OTHER


@lru_cache(maxsize=65536)
def is_communication(name: str) -> bool:
    """NCCL/RCCL kernels (HTA's definition, plus RCCL and generic all-reduce names)."""
    if _HTA_COMM_RE.match(name):
        return True
    low = name.lower()
    return low.startswith("rccl") or ("nccl" in low and "kernel" in low)


@lru_cache(maxsize=65536)
def gemm_precision(name: str) -> str | None:
    """Precision class of a GEMM/convolution kernel, or None when the kernel is not one.

    Returns one of ``fp32_simt`` (fp32 on CUDA cores), ``tf32`` (TF32 tensor cores), ``lowp``
    (bf16/fp16/fp8 tensor cores) or ``unknown`` (a GEMM whose name carries no precision hint).
    """
    low = name.lower()
    if not any(h in low for h in _GEMM_HINTS) or any(h in low for h in _NOT_GEMM_HINTS):
        return None
    if any(h in low for h in _LOWP_HINTS):
        return LOW_PRECISION
    if any(h in low for h in _TF32_HINTS):
        return TF32
    if any(h in low for h in _FP32_HINTS):
        return FP32_SIMT
    return UNKNOWN


@lru_cache(maxsize=65536)
def is_layout_transform(name: str) -> bool:
    """cuDNN's NCHW↔NHWC conversion kernels (a sign that the model is not channels_last)."""
    low = name.lower()
    return any(h in low for h in _LAYOUT_HINTS)


@lru_cache(maxsize=65536)
def is_multi_tensor(name: str) -> bool:
    """Kernels of the foreach/fused optimizer implementations."""
    low = name.lower()
    return any(h in low for h in _MULTI_TENSOR_HINTS)
