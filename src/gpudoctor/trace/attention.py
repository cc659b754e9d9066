"""Attention in a trace: hand-written (matmul → scale/mask → softmax → matmul) chains and SDPA's backend.

Why this exists: transformers spend much of their step in attention, and the fused kernels
(flash / memory-efficient / cuDNN) do it without writing the S × S score matrix to memory. A model
that writes its attention by hand (``softmax(q @ k.transpose(-2, -1) * scale)`` with a causal
``masked_fill``), or whose ``F.scaled_dot_product_attention`` falls back to the math path (fp32 inputs
on some GPUs, an explicit mask with dropout, an unsupported head dim), pays for that matrix several
times per layer: the first matmul writes it, the scale, the mask and the softmax each read and write
it again, the second matmul reads it, and backward does the same in reverse.

What is found, per host thread, over the ``aten::`` ops (their order is the same on CPU and CUDA
traces; only the kernels differ):

- a **hand-written chain**: an ``aten::softmax`` / ``aten::_softmax`` (forward) or
  ``aten::_softmax_backward_data`` (backward) with an ``aten::bmm`` on each side and, between them,
  nothing that belongs to another layer part (a linear layer's ``aten::mm``/``addmm``, a layer norm,
  an activation, another softmax). Backward chains take the adjacent pair of ``bmm`` on each side
  (the gradients with respect to both operands). A softmax inside an SDPA op (the math fallback's
  own) is the SDPA's, not a hand-written chain. The ops' input shapes are not kept by the trace
  reader, so matching shapes are not checked: the order of the ops is the evidence.
- **SDPA's backend**: ``aten::_scaled_dot_product_flash_attention`` (and ``…_for_cpu``),
  ``…_efficient_attention``, ``…_cudnn_attention``, ``…_attention_math`` and their backward ops.

The time of a chain is the GPU time of the kernels launched inside its host span (the span from its
first matmul's start to its last matmul's end, on its thread); a trace with no kernels at all (a CPU
run) counts the host span itself. Backward chains of a model that calls SDPA's math path are the
math path's (its backward is made of the same autograd ops); they are split between hand-written
and math in proportion to the forward chains of each.

What it must not do: know rule thresholds or read files.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

from gpudoctor.trace.context import Context, pct, rounded
from gpudoctor.trace.reader import K_KERNEL, EventTable

if TYPE_CHECKING:
    from gpudoctor.model import FactValue

_SOFTMAX_FORWARD = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
_SOFTMAX_BACKWARD = frozenset({"aten::_softmax_backward_data"})
_MATMUL = "aten::bmm"
#: ops that belong to another part of a transformer layer: a chain does not cross them
_BREAKERS = frozenset({
    "aten::mm", "aten::addmm", "aten::linear", "aten::layer_norm", "aten::native_layer_norm",
    "aten::native_layer_norm_backward", "aten::rms_norm", "aten::_fused_rms_norm", "aten::gelu",
    "aten::gelu_backward", "aten::relu", "aten::silu", "aten::silu_backward", "aten::embedding",
    "aten::embedding_backward", "aten::conv1d", "aten::convolution", "aten::cross_entropy_loss",
    "aten::log_softmax", "aten::_log_softmax", "aten::_log_softmax_backward_data", "aten::nll_loss",
}) | _SOFTMAX_FORWARD | _SOFTMAX_BACKWARD
#: how many ``aten::`` ops (nested ones included) a chain may hold between its softmax and a matmul
_MAX_OPS_BETWEEN = 60

#: SDPA backend ops → backend name; their ``_backward`` ops count to the same backend
SDPA_BACKENDS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_fused_attention_overrideable": "fused",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_attention_math_for_mps": "math",
}


def _backend_of(name: str) -> str | None:
    base = name[: -len("_backward")] if name.endswith("_backward") else name
    return SDPA_BACKENDS.get(base)


def _chain(t: EventTable, ops: list[int], at: int, backward: bool) -> tuple[float, float, float] | None:
    """The host span of the chain around the softmax at ``ops[at]`` and its matmuls' host time (µs),
    or None when it is not one."""
    names, name, ts, dur = t.names, t.name, t.ts, t.dur
    end_of_softmax = ts[ops[at]] + dur[ops[at]]
    want = 2 if backward else 1

    def walk(step: int) -> list[int]:
        found: list[int] = []
        k = at + step
        seen = 0
        while 0 <= k < len(ops) and seen <= _MAX_OPS_BETWEEN:
            op = ops[k]
            n = names[name[op]]
            if step > 0 and ts[op] < end_of_softmax:  # nested inside the softmax itself
                k += step
                continue
            if n == _MATMUL:
                found.append(op)
                if len(found) == want:
                    return found
                seen = 0
            elif n in _BREAKERS:
                break
            seen += 1
            k += step
        return found

    before, after = walk(-1), walk(1)
    if not before or not after:
        return None
    start = min(ts[i] for i in before)
    end = max(ts[i] + dur[i] for i in after)
    return start, end, sum(dur[i] for i in before + after)


def attention_metrics(t: EventTable, ctx: Context) -> dict[str, FactValue]:
    """Hand-written attention and SDPA backend facts of one rank (none when the trace has neither)."""
    n = ctx.n_steps
    if not n:
        return {}
    names, name, ts, dur = t.names, t.name, t.ts, t.dur
    forward: dict[int, list[tuple[float, float, float]]] = {}
    backward: dict[int, list[tuple[float, float, float]]] = {}
    sdpa: dict[int, list[tuple[float, float, str]]] = {}
    sdpa_backward: dict[int, set[tuple[float, float]]] = {}
    for th, ops in ctx.aten_by_thread.items():
        ordered = sorted(ops, key=lambda i: (ts[i], -dur[i]))
        for k, op in enumerate(ordered):
            if not ctx.in_steps(ts[op]):
                continue
            n_ = names[name[op]]
            backend = _backend_of(n_) if n_.startswith("aten::_scaled_dot") else None
            if backend is not None:
                sdpa.setdefault(th, []).append((ts[op], ts[op] + dur[op], backend))
                if n_.endswith("_backward"):
                    sdpa_backward.setdefault(th, set()).add((ts[op], ts[op] + dur[op]))
            elif n_ in _SOFTMAX_FORWARD or n_ in _SOFTMAX_BACKWARD:
                is_backward = n_ in _SOFTMAX_BACKWARD
                chain = _chain(t, ordered, k, is_backward)
                if chain is not None:
                    (backward if is_backward else forward).setdefault(th, []).append(chain)
    # a softmax nested in the one found just before (aten::softmax → aten::_softmax) or inside an SDPA op
    # (the math path's own) is not a chain of its own
    math_forward = 0
    for th, chains in forward.items():
        kept: list[tuple[float, float, float]] = []
        for span in sorted(set(chains)):
            if any(a <= span[0] and span[1] <= b for a, b, _ in sdpa.get(th, ())):
                math_forward += 1
                continue
            kept.append(span)
        forward[th] = kept
    for th, chains in backward.items():
        backward[th] = sorted(set(chains))
    hand_forward = sum(len(c) for c in forward.values())
    sdpa_calls = sum(1 for th, spans in sdpa.items() for a, b, _ in _outermost(spans) if (a, b) not in sdpa_backward.get(th, ()))
    if not hand_forward and not sdpa_calls and not any(backward.values()):
        return {}
    timer = _SpanTimer(t, ctx)
    hand = _Sum()
    for th, spans in forward.items():
        for span in spans:
            hand.add(*timer.time(th, span))
    back = _Sum()
    for th, spans in backward.items():
        for span in spans:
            back.add(*timer.time(th, span))
    hand_share = hand_forward / (hand_forward + math_forward) if hand_forward + math_forward else 0.0
    hand.add(back.matmul_us * hand_share, back.other_us * hand_share, back.precision_us, hand_share)
    by_backend: dict[str, float] = {}
    forward_calls: dict[str, int] = {}
    for th, sdpa_ops in sdpa.items():
        for a, b, backend in _outermost(sdpa_ops):
            matmul_us, other_us, _ = timer.time(th, (a, b, 0.0))
            by_backend[backend] = by_backend.get(backend, 0.0) + matmul_us + other_us
            forward_calls[backend] = forward_calls.get(backend, 0) + 1
    if math_forward:  # the math path's backward is the same autograd ops as a hand-written chain's
        by_backend["math"] = by_backend.get("math", 0.0) + (back.matmul_us + back.other_us) * (1.0 - hand_share)
    hand_us = hand.matmul_us + hand.other_us
    step_ms = ctx_step_ms(t, ctx)
    out: dict[str, FactValue] = {
        "attention_time_basis": "GPU kernels" if timer.has_kernels else "host ops (a trace without GPU kernels)",
        "attention_handwritten_chains_per_step": round(hand_forward / n, 2),
        "attention_handwritten_backward_chains_per_step": round(sum(len(c) for c in backward.values()) / n, 2),
        "attention_handwritten_ms_per_step": round(hand_us / 1000.0 / n, 3),
        "attention_handwritten_matmul_ms_per_step": round(hand.matmul_us / 1000.0 / n, 3),
        "attention_handwritten_other_ms_per_step": round(hand.other_us / 1000.0 / n, 3),
        "attention_matmul_precision": hand.precision() if timer.has_kernels else "host",
        "sdpa_calls_per_step": round(sdpa_calls / n, 2),
    }
    if step_ms:
        out["attention_handwritten_pct_of_step"] = pct(hand_us / 1000.0 / n, step_ms)
    if by_backend and any(by_backend.values()) or forward_calls:
        main = max(by_backend, key=lambda b: (by_backend[b], forward_calls.get(b, 0)))
        out["sdpa_backend"] = main
        out["sdpa_backends"] = ", ".join(f"{b} {v / 1000.0 / n:.2f} ms" for b, v in sorted(by_backend.items(), key=lambda kv: -kv[1]) if v > 0 or forward_calls.get(b))
        math_ms = by_backend.get("math", 0.0) / 1000.0 / n
        out["sdpa_math_ms_per_step"] = rounded(math_ms)
        if step_ms:
            out["sdpa_math_pct_of_step"] = pct(math_ms, step_ms)
    return out


def ctx_step_ms(t: EventTable, ctx: Context) -> float | None:
    """The mean profiled step (ms), what the shares of the step here are of."""
    if not ctx.n_steps:
        return None
    return sum(b - a for _, a, b in ctx.steps) / 1000.0 / ctx.n_steps


def _outermost(spans: list[tuple[float, float, str]]) -> list[tuple[float, float, str]]:
    """The SDPA ops not inside another one (``…_attention_math`` sits inside ``scaled_dot_product_attention``'s
    own span only as a child of its public op, which is not in the list; backward ops never nest)."""
    out: list[tuple[float, float, str]] = []
    for a, b, backend in sorted(spans, key=lambda s: (s[0], -s[1])):
        if out and a >= out[-1][0] and b <= out[-1][1]:
            continue
        out.append((a, b, backend))
    return out


class _Sum:
    """Matmul and other time of a set of chains, and the matmul kernels' time by precision class."""

    def __init__(self) -> None:
        self.matmul_us = self.other_us = 0.0
        self.precision_us: dict[str, float] = {}

    def add(self, matmul_us: float, other_us: float, precision_us: dict[str, float], share: float = 1.0) -> None:
        self.matmul_us += matmul_us
        self.other_us += other_us
        for p, us in precision_us.items():
            self.precision_us[p] = self.precision_us.get(p, 0.0) + us * share

    def precision(self) -> str:
        """The precision class (:mod:`.kernels`) with most matmul kernel time, ``unknown`` without any."""
        if not self.precision_us:
            return "unknown"
        return max(sorted(self.precision_us), key=self.precision_us.__getitem__)


class _SpanTimer:
    """Time of a chain's span: the GPU time of the kernels its thread launched inside it, split into
    GEMM kernels (any precision class) and the rest; without kernels in the trace, the host span split
    into its matmul ops' time and the rest."""

    def __init__(self, t: EventTable, ctx: Context) -> None:
        kind, ts, thread, dur, name = t.kind, t.ts, t.thread, t.dur, t.name
        classes = ctx.kernel_classes(t)
        by_thread: dict[int, list[tuple[float, float, str | None]]] = {}
        for i, launch in ctx.device_launches(t).items():
            if kind[i] == K_KERNEL:
                by_thread.setdefault(thread[launch], []).append((ts[launch], dur[i], classes[name[i]].precision))
        self.launches = {th: sorted(v, key=lambda x: x[0]) for th, v in by_thread.items()}
        self.starts = {th: [a for a, _, _ in v] for th, v in self.launches.items()}
        self.has_kernels = bool(self.launches)

    def time(self, th: int, span: tuple[float, float, float]) -> tuple[float, float, dict[str, float]]:
        """(matmul µs, other µs, matmul µs by precision class) of one span on thread ``th``."""
        start, end, matmul_host_us = span
        if not self.has_kernels:
            return matmul_host_us, max(0.0, end - start - matmul_host_us), {}
        starts = self.starts.get(th)
        if not starts:
            return 0.0, 0.0, {}
        lo, hi = bisect.bisect_left(starts, start), bisect.bisect_right(starts, end)
        matmul = other = 0.0
        by_precision: dict[str, float] = {}
        for _, d, precision in self.launches[th][lo:hi]:
            if precision is None:
                other += d
            else:
                matmul += d
                by_precision[precision] = by_precision.get(precision, 0.0) + d
        return matmul, other, by_precision
