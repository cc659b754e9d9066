"""The step picture's numpy path against its pure-Python one: the same floats, bit for bit.

tests/trace/test_vectorized_metrics.py compares the rounded facts of the shared traces; here the
interval primitives are compared with the pure functions they reproduce (random intervals with ties
on a half-µs grid), and ``partition`` and ``host_time`` — every part, the GEMM classes, the blocked and allocator
µs, the host's active time — on made-up tables that reach what the shared traces rarely do: DataLoader
waits inside GPU idle, syncs issued by ``aten::item``, launches on a full queue, allocator calls,
a correlation id launched twice, steps that overlap, GPU work outside the steps.
"""

from __future__ import annotations

import random
from array import array
from typing import Any

import pytest

from gpudoctor.trace import bottleneck as bn
from gpudoctor.trace import hostfloor, vectorized
from gpudoctor.trace import partition as pt
from gpudoctor.trace.context import Context
from gpudoctor.trace.events import (
    K_ANNOTATION,
    K_CPU_OP,
    K_KERNEL,
    K_MEMCPY,
    K_MEMSET,
    K_OTHER,
    K_PYTHON,
    K_RUNTIME,
    EventTable,
)
from gpudoctor.trace.timeline import intersection_length, merge, step_spans, subtract, total

np = pytest.importorskip("numpy")


def _spans(rng: random.Random, n: int, lo: float = 0.0, width: float = 60.0) -> list[tuple[float, float]]:
    out = []
    for _ in range(n):
        a = lo + (float(rng.randrange(0, int(2 * width))) / 2 if rng.random() < 0.7 else rng.uniform(0, width))
        out.append((a, a + rng.choice([0.0, 0.5, 1.0, 1.5, 3.0, 7.5, rng.uniform(0, 5)])))
    return out


def _arrays(spans: list[tuple[float, float]]) -> tuple[Any, Any]:
    return np.array([a for a, _ in spans], dtype=float), np.array([b for _, b in spans], dtype=float)


def _pairs(lows: Any, highs: Any) -> list[tuple[float, float]]:
    return list(zip(lows.tolist(), highs.tolist()))


def _windows(rng: random.Random, n: int) -> tuple[Any, Any]:
    lo = [float(rng.randrange(-8, 120)) / 2 for _ in range(n)]
    return np.array(lo), np.array([a + float(rng.randrange(0, 60)) / 2 for a in lo])


@pytest.mark.parametrize("seed", range(60))
def test_first_class_wins_np_is_the_sweep(seed: int) -> None:
    rng = random.Random(seed)
    raw = [[s for s in _spans(rng, rng.randrange(0, 15)) if s[1] > s[0]] for _ in range(5)]
    starts = np.array([a for spans in raw for a, _ in spans], dtype=float)
    ends = np.array([b for spans in raw for _, b in spans], dtype=float)
    cls = np.array([k for k, spans in enumerate(raw) for _ in spans], dtype=np.int64)
    own, covered = pt._first_class_wins([merge(spans) for spans in raw])
    own_np, covered_np = pt._first_class_wins_np(np, starts, ends, cls, 5)
    assert [_pairs(*pair) for pair in own_np] == own
    assert _pairs(*covered_np) == covered


@pytest.mark.parametrize("seed", range(60))
def test_clip_gaps_and_overlaps_np_are_the_pure_loops(seed: int) -> None:
    rng = random.Random(seed)
    union = merge(_spans(rng, rng.choice([0, 1, 3, 20, 80])))
    other = merge(_spans(rng, rng.choice([0, 1, 3, 20])))
    lo, hi = _windows(rng, rng.choice([1, 2, 7, 30]))
    pieces_lo, pieces_hi, counts = pt.clip_np(np, *_arrays(union), lo, hi)
    gaps_lo, gaps_hi, gap_counts = pt.gaps_np(np, pieces_lo, pieces_hi, counts, lo, hi)
    overlaps = pt.overlap_np(np, gaps_lo, gaps_hi, gap_counts, *_arrays(other))
    sums = pt.window_sums(np, pieces_hi - pieces_lo, counts)
    # each gap less the other list's pieces (windows that are disjoint pieces themselves): timeline.subtract
    rest_lo, rest_hi, per_gap = pt.gaps_np(np, *pt.clip_np(np, *_arrays(other), gaps_lo, gaps_hi), gaps_lo, gaps_hi)
    rest_counts = pt._regroup(np, per_gap, gap_counts)
    at = gap_at = rest_at = 0
    for j, (a, b) in enumerate(zip(lo.tolist(), hi.tolist())):
        clipped = pt.clip(union, a, b)
        assert _pairs(pieces_lo[at:at + counts[j]], pieces_hi[at:at + counts[j]]) == clipped
        at += counts[j]
        idle = pt.span_minus(a, b, clipped)
        assert _pairs(gaps_lo[gap_at:gap_at + gap_counts[j]], gaps_hi[gap_at:gap_at + gap_counts[j]]) == idle
        gap_at += gap_counts[j]
        assert sums[j] == total(clipped)
        step_other = pt.clip(other, a, b)
        assert overlaps[j] == intersection_length(idle, step_other)
        rest = _pairs(rest_lo[rest_at:rest_at + rest_counts[j]], rest_hi[rest_at:rest_at + rest_counts[j]])
        assert rest == (subtract(idle, step_other) if step_other else idle)
        rest_at += rest_counts[j]


@pytest.mark.parametrize("seed", range(20))
def test_window_sums_add_left_to_right(seed: int) -> None:
    rng = random.Random(seed)
    counts = [rng.choice([0, 1, 2, 9, 130, 700]) for _ in range(rng.choice([1, 2, 5, 40]))]
    if seed % 4 == 0:
        counts[0] = 300_000  # one window far longer than the others: one sum per window
    values = [rng.uniform(0, 1e3) for _ in range(sum(counts))]
    got = pt.window_sums(np, np.array(values), np.array(counts))
    at = 0
    for j, c in enumerate(counts):
        assert got[j] == sum(values[at:at + c])
        at += c


_KERNELS = ("ncclDevKernel_AllReduce_Sum_f32_RING_LL", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
            "volta_sgemm_128x64_nn", "ampere_tf32_s1688gemm_tf32_128x128_nn",
            "cutlass_75_tensorop_bf16_s1688gemm_bf16_256x128_32x3_tn_align1", "implicit_convolve_sgemm",
            "fmha_cutlassF_f32_aligned_64x64_rf_sm80", "gemm_kernel_with_no_precision_hint", "dgrad_engine_kernel",
            "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>",
            "triton_poi_fused_add_0", "Memcpy HtoD (Pageable -> Device)", "Memset (Device)")


def _table(seed: int) -> EventTable:
    """A made-up rank: steps with DataLoader waits, launches, syncs, allocator calls and GPU work."""
    rng = random.Random(seed)
    names: list[str] = []
    rows: list[tuple[int, str, int, float, float, int, int]] = []  # kind, name, thread, ts, dur, stream, corr

    def add(kind: int, name: str, ts: float, dur: float, thread: int = 0, stream: int = -1, corr: int = -1) -> None:
        rows.append((kind, name, thread, ts, dur, stream, corr))

    def grid(x: float) -> float:
        return float(round(x * 2)) / 2 if rng.random() < 0.5 else x

    corr = 0
    at = 100.0
    for step in range(rng.randrange(1, 7)):
        length = rng.uniform(200, 900) if rng.random() < 0.7 else rng.uniform(2000, 4000)  # untraced stretches
        overlap = rng.choice([0.0, 0.0, 0.0, 20.0])  # a step that starts before the last one ends
        start = grid(at - overlap)
        add(K_ANNOTATION, f"ProfilerStep#{step + 3}", start, length)
        if rng.random() < 0.7:
            add(K_ANNOTATION, "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                grid(start + rng.uniform(-5, 50)), rng.uniform(0, 150))
        gpu_at = start + rng.uniform(-30, 60)
        for _ in range(rng.randrange(0, 40)):
            t0 = grid(start + rng.uniform(0, length))
            name = rng.choice(("cudaLaunchKernel", "cudaMemcpyAsync", "cudaMalloc", "cudaFree"))
            launch = rng.choice([1.0, 4.0, 49.0, 50.0, 51.0, 300.0])
            corr += 1
            add(K_RUNTIME, name, t0, launch, corr=corr)
            if rng.random() < 0.05:  # a correlation id reused by a later call
                add(K_RUNTIME, "cudaLaunchKernel", t0 + 2.0, 80.0, corr=corr)
            kind = K_KERNEL
            kernel = rng.choice(_KERNELS)
            if kernel.startswith("Memcpy"):
                kind = K_MEMCPY
            elif kernel.startswith("Memset"):
                kind = K_MEMSET
            if name in ("cudaLaunchKernel", "cudaMemcpyAsync"):
                gpu_at = grid(max(gpu_at, t0) + rng.choice([0.0, 0.0, 0.5, rng.uniform(0, 40)]))
                dur = rng.choice([0.0, 0.5, rng.uniform(0, 60)])
                add(kind, kernel, gpu_at, dur, thread=1, stream=rng.choice([7, 7, 13, 20]), corr=corr)
                if rng.random() < 0.8:
                    gpu_at += dur
        for _ in range(rng.randrange(0, 3)):  # .item(): an aten op holding a sync call
            t0 = grid(start + rng.uniform(0, length))
            add(K_CPU_OP, "aten::item", t0, rng.uniform(5, 80))
            add(K_RUNTIME, rng.choice(("cudaStreamSynchronize", "cudaDeviceSynchronize")),
                t0 + rng.uniform(0, 4), rng.choice([2.0, rng.uniform(0, 3000)]))
        for _ in range(rng.randrange(0, 30)):
            add(rng.choice((K_CPU_OP, K_OTHER, K_PYTHON)), rng.choice(("aten::add", "aten::mm", "python_op")),
                grid(start + rng.uniform(-50, length + 50)), rng.choice([0.0, rng.uniform(0, 400)]),
                thread=rng.choice([0, 0, 2]))
        at = start + length + rng.choice([0.0, 0.0, rng.uniform(0, 2500)])
    if rng.random() < 0.5:  # GPU work after the steps
        add(K_KERNEL, _KERNELS[1], at + 10.0, 5.0, thread=1, stream=7, corr=corr + 1)
    rng.shuffle(rows)
    rows.sort(key=lambda r: r[3] if rng.random() < 0.9 else 0.0)  # nearly in time order
    ids = {n: i for i, n in enumerate(dict.fromkeys(r[1] for r in rows))}
    names = list(ids)
    return EventTable(names=names, threads=[(1, 0), (1, 1), (1, 2)],
                      kind=bytearray(r[0] for r in rows), name=array("I", [ids[r[1]] for r in rows]),
                      thread=array("I", [r[2] for r in rows]), ts=array("d", [r[3] for r in rows]),
                      dur=array("d", [r[4] for r in rows]), stream=array("q", [r[5] for r in rows]),
                      correlation=array("q", [r[6] for r in rows]), nbytes=array("q", [-1] * len(rows)))


@pytest.mark.parametrize("seed", range(80))
def test_partition_np_is_the_pure_partition(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(seed)
    got = {}
    for mode in ("never", "always"):
        monkeypatch.setenv(vectorized.MODE_ENV, mode)
        t.cache.clear()
        ctx = Context(t, step_spans(t))
        if not ctx.steps or not ctx.device:
            pytest.skip("no steps or no GPU work")
        got[mode] = (pt.partition(t, ctx), hostfloor.host_time(t, ctx), bn.bottleneck_metrics(t, ctx))
    (pure, pure_host, pure_facts), (fast, fast_host, fast_facts) = got["never"], got["always"]
    (parts, gemm_us), (blocked, alloc, active) = fast, fast_host
    assert parts == pure[0] and list(parts) == list(pure[0])
    assert gemm_us == pure[1] and list(gemm_us) == list(pure[1])
    assert (blocked, alloc, active) == pure_host
    assert all(type(v) is float for v in (*parts.values(), *gemm_us.values(), alloc, *active))
    assert repr(fast_facts) == repr(pure_facts)
