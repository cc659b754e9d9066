"""What bounds a training step: the verdict and the step-time picture, shared by the trace and live sides.

Why this exists: ``analyze`` (from a trace's timeline) and ``attach`` (from the agent's timings and NVML,
or from a profile window) must say the same thing the same way: one line that names what bounds the
step and a stacked bar of where the step goes. The parts are measured elsewhere
(:mod:`gpudoctor.trace.bottleneck`, :mod:`gpudoctor.live.bottleneck`); here they become a verdict.

What it must not do: measure anything, import anything heavy, or render colours.
"""

from __future__ import annotations

from typing import Any

import msgspec

#: Step parts, in the order the picture shows them.
PARTS = ("gpu:busy", "gpu:gemm/conv", "gpu:fusible", "gpu:other", "gpu:communication", "gpu:memcpy",
         "idle:input wait", "idle:host sync", "idle:host/launch")

#: Short labels for the picture's legend.
LABELS = {"gpu:busy": "GPU busy", "gpu:gemm/conv": "GEMM/conv", "gpu:fusible": "fusible", "gpu:other": "other GPU",
          "gpu:communication": "comm", "gpu:memcpy": "memcpy", "idle:input wait": "input wait",
          "idle:host sync": "sync idle", "idle:host/launch": "host idle"}


class Bottleneck(msgspec.Struct, frozen=True):
    """What bounds the step, with the share of the step it takes and the parts it is made of."""

    bound: str                      # gpu-compute | input | host-overhead | communication | memory
    share_pct: float
    line: str
    parts: tuple[tuple[str, float, float], ...]  # (part, ms per step, % of step)
    step_ms: float
    basis: str = "trace"   # trace (a profile window's timeline) | live (agent timings + NVML)

    def to_dict(self) -> dict[str, Any]:
        return {"bound": self.bound, "share_pct": self.share_pct, "line": self.line, "step_ms": self.step_ms,
                "basis": self.basis,
                "parts": [{"name": n, "ms_per_step": ms, "pct": p} for n, ms, p in self.parts]}


_BOUND_WORDS = {
    "gpu-compute": "GPU compute",
    "input": "the input pipeline",
    "host-overhead": "host overhead (Python, launches, syncs)",
    "communication": "communication",
    "memory": "the memory allocator",
}


def verdict_from_parts(parts: dict[str, float], step_ms: float, allocator_ms: float = 0.0,
                       where: str = "", basis: str = "trace") -> Bottleneck:
    """The bottleneck from step parts (ms per step): the largest of input, host, communication, compute."""
    step_ms = max(step_ms, 1e-9)
    groups = {
        "input": parts.get("idle:input wait", 0.0),
        "host-overhead": parts.get("idle:host sync", 0.0) + parts.get("idle:host/launch", 0.0),
        "communication": parts.get("gpu:communication", 0.0),
        "gpu-compute": sum(parts.get(p, 0.0) for p in ("gpu:busy", "gpu:gemm/conv", "gpu:fusible", "gpu:other",
                                                       "gpu:memcpy")),
    }
    bound = max(groups, key=lambda k: groups[k])
    if allocator_ms >= 0.15 * step_ms and allocator_ms >= 0.5 * groups[bound]:
        bound, groups["memory"] = "memory", allocator_ms
    share = round(100.0 * groups[bound] / step_ms, 1)
    rows = tuple((p, round(parts.get(p, 0.0), 3), round(100.0 * parts.get(p, 0.0) / step_ms, 1)) for p in PARTS)
    return Bottleneck(bound, share, _line(bound, share, groups, parts, step_ms, where), rows, round(step_ms, 3), basis)


def _line(bound: str, share: float, groups: dict[str, float], parts: dict[str, float], step_ms: float,
          where: str) -> str:
    head = f"{_BOUND_WORDS[bound][0].upper()}{_BOUND_WORDS[bound][1:]} bounds the step{where}: "
    if bound == "gpu-compute":
        detail = ", ".join(f"{p[4:]} {100 * parts.get(p, 0.0) / step_ms:.0f}%" for p in
                           ("gpu:gemm/conv", "gpu:fusible", "gpu:other", "gpu:memcpy") if parts.get(p, 0.0) > 0.005 * step_ms)
        return head + f"the GPU is busy {share:.0f}% of a {step_ms:.1f} ms step" + (f" ({detail})" if detail else "")
    if bound == "input":
        return head + f"the GPU waits for data {share:.0f}% of a {step_ms:.1f} ms step"
    if bound == "host-overhead":
        sync = 100 * parts.get("idle:host sync", 0.0) / step_ms
        return head + f"the GPU idles {share:.0f}% of a {step_ms:.1f} ms step while the host works ({sync:.0f}% after syncs)"
    if bound == "communication":
        return head + f"collectives not hidden by compute take {share:.0f}% of a {step_ms:.1f} ms step"
    return head + f"cudaMalloc/cudaFree take {share:.0f}% of a {step_ms:.1f} ms step"
