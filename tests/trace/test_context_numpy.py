"""Context, fusion, steps and graph-break metrics: the numpy path against the pure path on random traces.

The shared traces (test_vectorized_metrics.py) are well-formed: their ``aten::`` ops nest, their
correlation ids ascend, a step's GPU work ends before the next step's begins, and few threads run
ops. The numpy path has a check and a fallback for each of those (context.py ``_outermost``,
``device_launch_array``, steps.py ``_running_max_per_segment`` …), which these random traces reach:
ops that cross their parent's end, equal start times, correlation ids shared by two calls and out
of order, device work of one step after the next one's, a dozen host threads, graph breaks.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.trace import fusion, steps, vectorized
from gpudoctor.trace.context import Context
from gpudoctor.trace.reader import load_trace
from gpudoctor.trace.timeline import step_spans

pytest.importorskip("numpy")

KERNELS = [
    "void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, std::array<char*, 3ul> >",
    "void at::native::batch_norm_backward_kernel<c10::BFloat16, float, float, int>(torch::headeronly::detail",
    "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>(float*, float const*",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 128, 1>(float*",
    "triton_poi_fused_addmm_relu_threshold_backward_0",
    "sm90_xmma_fprop_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1",
    "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::Tensor",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
]
COPIES = [("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"), ("Memcpy DtoH (Device -> Pinned)", "gpu_memcpy"),
          ("Memcpy HtoD (Pinned -> Device)", "gpu_memcpy"), ("Memset (Device)", "gpu_memset")]
OPS = ["aten::linear", "aten::to", "aten::_to_copy", "aten::copy_", "aten::item", "aten::add_",
       "autograd::engine::evaluate_function: ToCopyBackward0"]


def _x(cat: str, name: str, tid: int, ts: float, dur: float, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if "stream" in args else 1, "tid": tid,
            "ts": ts, "dur": dur, "args": args}


def _trace(tmp_path: Path, seed: int) -> Path:
    """Six steps of random host ops, launches and device work; times on a coarse grid so that some tie."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    corr = 1000
    step_us = 10_000.0
    grid = rng.choice([1.0, 0.5, 25.0])  # coarse: equal starts

    def at(lo: float, hi: float) -> float:
        return round(rng.uniform(lo, hi) / grid) * grid

    for k in range(6):
        t0 = 1_000_000.0 + k * step_us
        events.append(_x("user_annotation", f"ProfilerStep#{k}", 1, t0, step_us - rng.choice([0.0, 1.0])))
        events.append(_x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1,
                         t0 + 1.0, at(10, 500)))
        opt = t0 + at(6000, 8000)
        events.append(_x("user_annotation", "Optimizer.step#SGD.step", 1, opt, at(500, 1500)))
        events.append(_x("user_annotation", "Optimizer.step#SGD.step", rng.choice([1, 2]), opt + at(0, 100), at(50, 300)))
        region = at(500, 2000)
        events.append(_x("cpu_op", f"Torch-Compiled Region: {k % 2}/{k % 3}", 1, t0 + region, 3000.0))
        for g in range(rng.randint(1, 4)):  # graph calls inside the region (breaks between), some outside (backward)
            events.append(_x("cpu_op", "## Call CompiledFxGraph fabc ##", 1, t0 + region + 50 + g * 700, at(100, 600)))
        events.append(_x("cpu_op", "## Call CompiledFxGraph fbwd ##", 3, t0 + 5000 + at(0, 2000), at(100, 600)))
        for _ in range(rng.randint(20, 60)):
            tid = rng.randint(1, 12)
            start = t0 + at(0, step_us)
            events.append(_x("cpu_op", rng.choice(OPS), tid, start, at(0, 800)))
            if rng.random() < 0.5:
                events.append(_x("cpu_op", rng.choice(OPS), tid, start + at(0, 200), at(0, 900)))  # nested or crossing
            when = start + at(0, 300)
            if rng.random() < 0.1:
                events.append(_x("cuda_runtime", "cudaStreamSynchronize", tid, when, at(1, 400)))
                continue
            copy = rng.random() < 0.2
            corr += rng.choice([1, 1, 1, 2, -3, 0])  # some ids out of order, some shared by two calls
            events.append(_x("cuda_runtime", "cudaMemcpyAsync" if copy else "cudaLaunchKernel", tid, when,
                             at(1, 30), correlation=corr))
            gpu = when + at(-2000, 3000)  # device work may run into the next step's
            name, cat = rng.choice(COPIES) if copy else (rng.choice(KERNELS), "kernel")
            events.append(_x(cat, name, 7 + rng.randint(0, 2), gpu, at(0, 400), stream=7, correlation=corr,
                             device=0, bytes=rng.randint(0, 10**6)))
    rng.shuffle(events)  # the table in file order: indices not in time order
    path = tmp_path / f"random_{seed}.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _everything(path: Path, mode: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setenv(vectorized.MODE_ENV, mode)
    t = load_trace(str(path), 0).events
    ctx = Context(t, step_spans(t))
    out: dict[str, Any] = {
        "sync_waits": ctx.sync_waits(t),
        "outer_aten_ops": ctx.outer_aten_ops(t),
        "aten_by_thread": ctx.aten_by_thread,  # after outer_aten_ops: sorted in place as the pure path does
        "fusion": fusion.fusion_metrics(t, ctx),
        "step_rows": steps.step_rows(t, ctx),
        "dataloader": steps.dataloader_metrics(t, ctx),
        "sync_and_copy": steps.sync_and_copy_metrics(t, ctx),
        "optimizer": steps.optimizer_metrics(t, ctx),
        "compile": steps.compile_metrics(t, ctx),
        "device": ctx.device,
        "launch_by_corr": list(ctx.launch_by_corr.items()),
        "sync_calls": ctx.sync_calls,
        "host_by_name": list(ctx.host_by_name.items()),
        "device_launches": list(ctx.device_launches(t).items()),
        "device_steps": list(ctx.device_steps(t).items()),
        "kernel_classes": list(ctx.kernel_classes(t).items()),
    }
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_numpy_path_gives_the_pure_paths_values(tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _trace(tmp_path, seed)
    pure = _everything(path, "never", monkeypatch)
    fast = _everything(path, "always", monkeypatch)
    assert pure["compile"]["graph_break_windows_per_step"] > 0 and pure["optimizer"] and pure["device_steps"]
    for key, value in pure.items():
        assert repr(fast[key]) == repr(value), key  # repr: the same types too (no numpy scalar)


def test_the_random_traces_reach_the_fallbacks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The traces above are not all well-formed in the ways the numpy path checks."""
    import numpy as np

    from gpudoctor.trace import context as context_module
    from gpudoctor.trace import steps as steps_module

    reached: set[str] = set()
    outermost, running_max = context_module._outermost, steps_module._running_max_per_segment

    def watch_outermost(np_: Any, start: Any, end: Any) -> Any:
        guess = np.empty(len(start), dtype=bool)
        if len(start):
            guess[0] = True
            guess[1:] = start[1:] >= np.maximum.accumulate(end)[:-1]
        out = outermost(np_, start, end)
        if not (out == guess).all():
            reached.add("crossing ops")
        return out

    def watch_running_max(np_: Any, values: Any, first: Any) -> Any:
        out = running_max(np_, values, first)
        if not (out == np.maximum.accumulate(values)).all():
            reached.add("steps out of order")
        return out

    monkeypatch.setattr(context_module, "_outermost", watch_outermost)
    monkeypatch.setattr(steps_module, "_running_max_per_segment", watch_running_max)
    monkeypatch.setenv(vectorized.MODE_ENV, "always")
    for seed in range(4):
        t = load_trace(str(_trace(tmp_path, seed)), 0).events
        ctx = Context(t, step_spans(t))
        ctx.outer_aten_ops(t)
        steps.step_rows(t, ctx)
        if len(ctx.aten_by_thread) > 8:
            reached.add("many threads")
        corr = np.frombuffer(t.correlation, dtype=np.int64)[ctx._runtime_calls_np(t)]
        if len(corr) > 1 and not (corr[1:] > corr[:-1]).all():
            reached.add("ids out of order")
    assert reached == {"crossing ops", "steps out of order", "many threads", "ids out of order"}
