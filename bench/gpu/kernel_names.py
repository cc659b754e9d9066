#!/usr/bin/env python3
"""Print the CUDA kernel names cuBLAS/cuDNN pick for fp32, TF32 and bf16 matmuls and convolutions.

Why this exists: gpudoctor tells precision from kernel names (trace/kernels.py). cuBLAS on Hopper
names many kernels ``nvjet_*`` whatever their precision, so the name rules are checked here on the
machine's own libraries: each case runs a few products under torch.profiler and prints the kernels
with gpudoctor's precision class beside them.

    PYTHONPATH=src python3 bench/gpu/kernel_names.py        # ~20 s on an H200
"""

from __future__ import annotations

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from gpudoctor.trace.kernels import gemm_precision


def case(label: str, fn) -> None:  # type: ignore[no-untyped-def]
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    for name in names:
        print(f"{label:<28} {str(gemm_precision(name)):<10} {name[:150]}")


def main() -> int:
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    x = torch.randn(64, 256, 56, 56, device="cuda")
    conv = torch.nn.Conv2d(256, 256, 3, padding=1).cuda()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    case("matmul fp32 (TF32 off)", lambda: a @ b)
    case("conv fp32 (TF32 off)", lambda: conv(x))
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    case("matmul TF32", lambda: a @ b)
    case("conv TF32", lambda: conv(x))
    with torch.autocast("cuda", dtype=torch.bfloat16):
        case("matmul bf16 (autocast)", lambda: a @ b)
        case("conv bf16 (autocast)", lambda: conv(x))
    return 0


if __name__ == "__main__":
    sys.exit(main())
