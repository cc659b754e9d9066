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
from typing import NamedTuple

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
_CONV_HINTS = ("conv", "winograd", "fft", "dgrad", "wgrad", "fprop", "implicit")
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
    if is_fp32_attention(name):
        return FP32_SIMT
    if any(h in low for h in _LOWP_HINTS):
        return LOW_PRECISION
    if any(h in low for h in _TF32_HINTS):
        return TF32
    if any(h in low for h in _FP32_HINTS):
        return FP32_SIMT
    return UNKNOWN


#: cuBLAS/CUTLASS spell the operand alignment they were built for in the kernel name, in elements:
#: ``…_tn_align1``, ``…_aligna2_alignc2``. 16-bit tensor-core kernels need 8 (16 bytes).
_UNALIGNED_RE = re.compile(r"align[abc]?[124](?!\d)")


@lru_cache(maxsize=65536)
def is_unaligned_lowp_gemm(name: str) -> bool:
    """A bf16/fp16 tensor-core GEMM built for operands aligned to fewer than 8 elements: one of the
    matrix dimensions is not a multiple of 8 (GPT-2's vocabulary of 50257), so cuBLAS falls back from
    its fast kernels (``nvjet_…``) to old ones (``cutlass_75_tensorop_bf16_s1688gemm_bf16_…_align1``)."""
    return gemm_precision(name) == LOW_PRECISION and _UNALIGNED_RE.search(name.lower()) is not None


_ATTENTION_HINTS = ("fmha", "flash_fwd", "flash_bwd", "attention")
_HALF_DTYPE_HINTS = ("bf16", "fp16", "f16", "bfloat16", "half", "e4m3", "e5m2", "fp8")


@lru_cache(maxsize=65536)
def is_fp32_attention(name: str) -> bool:
    """Fused attention in fp32 (``fmha_cutlassF_f32_aligned_64x64_rf_sm80``: the memory-efficient SDPA
    kernel that fp32 inputs get, on CUDA cores whatever allow_tf32 says); under bf16/fp16 the flash
    kernels run on tensor cores instead."""
    low = name.lower()
    return (any(h in low for h in _ATTENTION_HINTS) and ("f32" in low or "float" in low)
            and not any(h in low for h in _HALF_DTYPE_HINTS))


@lru_cache(maxsize=65536)
def is_convolution(name: str) -> bool:
    """A convolution kernel (of the GEMM/conv kernels: cuDNN's implicit GEMMs, Winograd, FFT, dgrad/wgrad),
    as opposed to a matmul: ``cudnn.allow_tf32`` reaches these, ``matmul.allow_tf32`` the others."""
    low = name.lower()
    return any(h in low for h in _CONV_HINTS)


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


# ---- what torch.compile could fuse: memory-bound kernels of eager PyTorch ------------------------
FUSE_NORM = "norm"                # batch/layer/group/RMS norm forward and backward (ATen and cuDNN)
FUSE_SOFTMAX = "softmax"          # softmax / log-softmax forward and backward
FUSE_REDUCE = "reduce"            # ATen reductions (sum, mean, var, loss reductions)
FUSE_CAST = "cast"                # dtype conversions (fp32 → bf16/fp16 and back)
FUSE_COPY = "copy"                # plain copies: .contiguous(), cat, index copies
FUSE_ELEMENTWISE = "elementwise"  # pointwise ops and activations (add, mul, relu, gelu, dropout …)

_NORM_HINTS = ("batch_norm", "layer_norm", "group_norm", "rms_norm", "instance_norm", "cudnn::bn_", "bn_fw_",
               "bn_bw_", "gammabetabackward", "welford")
_SOFTMAX_HINTS = ("softmax",)
_REDUCE_HINTS = ("reduce_kernel", "nll_loss", "cross_entropy")
_CAST_HINTS = ("bfloat16_copy_kernel", "float16_copy_kernel", "float8_copy_kernel", "withcast")
_COPY_HINTS = ("direct_copy_kernel", "catarraybatchedcopy", "cat_array_batched_copy", "index_elementwise")
_ELEMENTWISE_HINTS = ("elementwise_kernel", "fused_dropout", "dropout_kernel")
#: memory-bound kernels that torch.compile does not turn into fused Triton code: random numbers made
#: for synthetic inputs, library helpers of GEMMs/convolutions, embedding backward, sorts.
_NOT_FUSIBLE_HINTS = ("distribution_", "splitkreduce", "computeoffsets", "init_device_workspace",
                      "scalepackedtensor", "flip_filter", "epilogue", "embedding_backward", "radixsort",
                      "sort_", "cub::")


@lru_cache(maxsize=65536)
def is_compiled_kernel(name: str) -> bool:
    """Kernels that Inductor generated (``triton_poi_fused_…``, ``triton_red_…``, ``triton_tem_…``)."""
    return name.startswith("triton")


@lru_cache(maxsize=65536)
def fusion_class(name: str) -> str | None:
    """The class of an eager memory-bound kernel that torch.compile could fuse, or None.

    None for GEMMs and convolutions, communication, layout transforms (GD203's), optimizer
    multi-tensor kernels (``torch.compile(model)`` does not compile the optimizer), memcpy/memset,
    Triton kernels (already compiled), library helpers and kernels Inductor cannot fuse
    (:data:`_NOT_FUSIBLE_HINTS`). Pooling and other kernels that fit no class are None too, so the
    fusible time is a lower bound.
    """
    if is_compiled_kernel(name) or name.startswith(("Memcpy", "Memset")) or is_communication(name):
        return None
    if gemm_precision(name) is not None or is_layout_transform(name) or is_multi_tensor(name):
        return None
    low = name.lower()
    if any(h in low for h in _NOT_FUSIBLE_HINTS):
        return None
    for hints, cls in ((_NORM_HINTS, FUSE_NORM), (_SOFTMAX_HINTS, FUSE_SOFTMAX), (_CAST_HINTS, FUSE_CAST),
                       (_COPY_HINTS, FUSE_COPY), (_REDUCE_HINTS, FUSE_REDUCE),
                       (_ELEMENTWISE_HINTS, FUSE_ELEMENTWISE)):
        if any(h in low for h in hints):
            return cls
    return None


class KernelClass(NamedTuple):
    """Everything the metrics ask of one device event name, computed once per distinct name."""

    communication: bool       # :func:`is_communication`
    precision: str | None     # :func:`gemm_precision`
    fusion: str | None        # :func:`fusion_class`
    compiled: bool            # :func:`is_compiled_kernel`
    layout_transform: bool    # :func:`is_layout_transform`
    multi_tensor: bool        # :func:`is_multi_tensor`
    # the GEMM kind, read where ``precision`` is not None:
    convolution: bool         # :func:`is_convolution`
    fp32_attention: bool      # :func:`is_fp32_attention`
    unaligned_lowp: bool      # :func:`is_unaligned_lowp_gemm`


def classify(name: str) -> KernelClass:
    """The :class:`KernelClass` of one kernel (or memcpy/memset) name."""
    return KernelClass(is_communication(name), gemm_precision(name), fusion_class(name), is_compiled_kernel(name),
                       is_layout_transform(name), is_multi_tensor(name), is_convolution(name), is_fp32_attention(name),
                       is_unaligned_lowp_gemm(name))
