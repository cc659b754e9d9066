"""Measured kernel-time ratios between precision classes, per GPU architecture: data for estimates.

Why this exists: "bf16 would make these GEMMs faster" is worth a number only with a ratio behind it.
The ratios here are GEMM/convolution *kernel-time* ratios (time in the slower class ÷ time of the
same work in the faster class), measured on real traces of the same model in each precision — not
peak-FLOP ratios, which overstate the gain of memory-bound convolutions several times. Each row
names its measurement. A GPU whose architecture has no row gets no ratio, and the precision rules
then say their estimate needs it.

What it must not do: import anything; read files.
"""

from __future__ import annotations

#: arch major → {ratio name: (low, high)}. Low/high span the models measured (see ``SOURCES``).
RATIOS: dict[int, dict[str, tuple[float, float]]] = {
    9: {"fp32_to_bf16": (2.8, 4.2), "tf32_to_bf16": (1.6, 2.2), "fp32_to_tf32": (1.7, 2.5),
        "fp32_matmul_to_bf16": (6.0, 12.5), "fp32_matmul_to_tf32": (3.0, 6.0),
        "fp32_attention_to_bf16": (8.0, 20.0)},
}

#: Where each row's numbers come from.
SOURCES: dict[int, str] = {
    9: ("H200, torch 2.11+cu130, cuDNN 9.19: torchvision resnet18 batch 128, the same steps traced in fp32 "
        "(TF32 off), TF32 and bf16 autocast (shared/traces/h200): GEMM/conv kernel time per step 11.14 ms fp32 "
        "CUDA cores, 5.31 ms TF32, 3.19 ms bf16 — ratios 3.49 (fp32→bf16), 1.66 (TF32→bf16), 2.10 "
        "(fp32→TF32) — these are convolution ratios; the range is ±20% around them. TF32→bf16 on ResNet-50 "
        "batch 256 (timm benchmark.py, bench/validation/realscripts_validation.py): 55.0 → 26.3 ms eager (2.09), "
        "53.5 → 24.4 ms compiled (2.19), hence 1.6–2.2. Matmuls (not "
        "convolutions): a 12-layer 768-wide transformer, batch 8 × 1024 tokens, GEMM kernel time 128.8 ms "
        "fp32 → 10.5 ms bf16 (12.3×, the impact_calibration.py probe (docs/bench-history.md)); the Hugging Face GPT-2 Trainer "
        "(batch 8 × 1024, bench/validation/realscripts_validation.py) 148.9 ms fp32 → 22.9 ms bf16 GEMM time (6.5×, "
        "attention included), hence 6–12.5. fp32 fused attention (fmha_cutlassF_f32, memory-efficient SDPA) → "
        "bf16 flash attention: 8–20×, bounded by nanoGPT's run (112 ms fp32 attention + 128 ms TF32 matmuls "
        "→ 51.9 ms bf16 GEMM time). fp32 → TF32 matmuls not yet "
        "measured: 3–6× is the range between the convolution ratio and the peak-throughput ratio"),
}


def ratios_for(compute_major: int | None, device_name: str | None = None) -> dict[str, float]:
    """``k_<from>_to_<to>_low/high`` facts for a GPU, or {} when its architecture has no row."""
    major = compute_major
    if major is None and device_name:
        major = _major_from_name(device_name)
    row = RATIOS.get(major) if major is not None else None
    if row is None:
        return {}
    out: dict[str, float] = {}
    for name, (low, high) in row.items():
        out[f"k_{name}_low"], out[f"k_{name}_high"] = low, high
    return out


def _major_from_name(name: str) -> int | None:
    low = name.lower()
    for hints, major in ((("h100", "h200", "h800", "gh200", "hopper"), 9), (("a100", "a800", "a10", "a30", "a40",
                          "rtx 30", "rtx a"), 8), (("b200", "b100", "gb200"), 10), (("v100",), 7)):
        if any(h in low for h in hints):
            return major
    return None
