#!/usr/bin/env python3
"""What does the in-process agent cost a training loop? Steps/s detached vs attached, interleaved.

One training process runs the whole time; the bench alternates windows with the agent detached and
attached (ABBA order, so a slow drift of the machine does not favour either state), measuring the
step rate from the loop's own progress lines — never from the agent. While attached, a client
polls ``stats`` once a second, as the live session does. Then, in a second process, a micro
benchmark times the hooks themselves: ``optimizer.step()`` and a DataLoader batch, agent off vs on.

    .venv/bin/python bench/perf/agent_overhead.py                        # CPU, ~2 minutes
    python3.12 bench/validation/agent_overhead_gpu.py                      # the H200 variant

Attach modes: ``inject`` (hypno, as ``gpudoctor attach`` does; the default when hypno is
importable) or ``inprocess`` (the loop starts/stops the agent from a side thread, as
``gpudoctor run``/``install_agent()`` do). Prints one table; ``--json`` adds a machine-readable line.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))


# ---------------------------------------------------------------------------------------------
# The training loop (child process)
# ---------------------------------------------------------------------------------------------

class _DecodedImages:
    """A dataset whose every sample burns ``decode_ms`` of real CPU (a busy loop, like JPEG decoding):
    with workers on every core, the job saturates the CPU — the case where the agent's CPU matters most."""

    def __init__(self, data: object, decode_ms: float) -> None:
        self.data, self.decode_s = data, decode_ms / 1e3

    def __len__(self) -> int:
        return len(self.data)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> object:
        end = time.thread_time() + self.decode_s
        while time.thread_time() < end:
            pass
        return self.data[i]  # type: ignore[index]


def _child(args: argparse.Namespace) -> None:
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    if args.device == "cpu":
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    if args.model == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(256, args.width), torch.nn.ReLU(),
                                    torch.nn.Linear(args.width, args.width), torch.nn.ReLU(),
                                    torch.nn.Linear(args.width, 10))
        data = TensorDataset(torch.randn(args.batch * 64, 256), torch.randint(0, 10, (args.batch * 64,)))
    else:
        w = args.width
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
            torch.nn.Conv2d(w, w, 3, padding=1), torch.nn.BatchNorm2d(w), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(w, 10))
        data = TensorDataset(torch.randn(args.batch * 16, 3, 32, 32), torch.randint(0, 10, (args.batch * 16,)))
    model.to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    workers = (os.cpu_count() or 1) if args.workers < 0 else args.workers
    if args.decode_ms > 0:
        data = _DecodedImages(data, args.decode_ms)  # type: ignore[assignment]
    loader = DataLoader(data, batch_size=args.batch, shuffle=True, num_workers=workers, drop_last=True,
                        pin_memory=device.type == "cuda", persistent_workers=workers > 0,
                        prefetch_factor=4 if workers > 0 else None)

    def control() -> None:   # in-process mode: "on"/"off" on stdin start/stop the agent from this thread
        from gpudoctor.agent import runtime
        for line in sys.stdin:
            if line.strip() == "on":
                print(f"agent {runtime.install('import')}", flush=True)
            elif line.strip() == "off":
                runtime.detach()
                print("agent off", flush=True)

    if args.mode == "inprocess":
        threading.Thread(target=control, daemon=True).start()
    steps, next_tick = 0, 0.0
    print("ready", flush=True)
    while True:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            steps += 1
            if steps % 10 == 0 and device.type == "cuda":
                loss.item()        # a sync every 10 steps, as a logging loop would
            for _ in range(args.syncs_per_step):
                loss.item()        # the per-step syncs GD301 is about (counted on sampled steps)
            now = time.perf_counter()
            if now >= next_tick:
                print(f"tick {now:.6f} {steps}", flush=True)
                next_tick = now + 0.1


def _micro(args: argparse.Namespace) -> None:
    """Per-call cost of the hooks: optimizer.step() and DataLoader batches, agent off vs on."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from gpudoctor.agent import runtime

    torch.set_num_threads(1)
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=0.0)
    param.grad = torch.zeros(1)
    loader = DataLoader(TensorDataset(torch.zeros(4096, 1)), batch_size=1)

    # CPU time of this thread, not wall time: on a shared machine, being preempted is not the agent's cost.
    def time_steps(n: int) -> float:
        start = time.thread_time()
        for _ in range(n):
            opt.step()
        return (time.thread_time() - start) / n * 1e6

    def time_batches() -> float:
        start = time.thread_time()
        count = sum(1 for _ in loader)
        return (time.thread_time() - start) / count * 1e6

    def settle() -> None:
        agent = runtime.current()
        deadline = time.monotonic() + 5
        while agent is not None and agent.torch_hooks.waiting_for_torch() and time.monotonic() < deadline:
            time.sleep(0.01)

    # Paired short blocks, off then on, many times: the machine's drift cancels in each pair's difference.
    diffs: dict[str, list[float]] = {"step": [], "batch": []}
    base: dict[str, list[float]] = {"step": [], "batch": []}
    time_steps(2000)
    for _ in range(args.micro_rounds):
        off_step, off_batch = time_steps(args.micro_steps), time_batches()
        runtime.install("import")
        settle()
        on_step, on_batch = time_steps(args.micro_steps), time_batches()
        runtime.detach()
        diffs["step"].append(on_step - off_step)
        diffs["batch"].append(on_batch - off_batch)
        base["step"].append(off_step)
        base["batch"].append(off_batch)
    # The hook bodies alone, timed in a tight loop (what the agent adds per step, without torch around it).
    runtime.install("import")
    settle()
    agent = runtime.current()
    assert agent is not None
    n = 200000
    start = time.thread_time()
    for _ in range(n):
        agent.torch_hooks._on_optimizer_step(opt, (), {})
    hook_us = (time.thread_time() - start) / n * 1e6
    # The backward-pass boundary's body, as an optimizer loop pays it (ignored: the optimizer marks steps).
    start = time.thread_time()
    for _ in range(n):
        agent.torch_hooks._on_backward()
    backward_us = (time.thread_time() - start) / n * 1e6
    # .item() with the sampled-step sync wrappers on vs off (what a counted step pays per sync call).
    tensor = torch.ones(1)
    agent.syncs.count_cpu = True
    item_off = _per_call_us(tensor.item, 200000)
    agent.syncs._arm()
    item_on = _per_call_us(tensor.item, 200000)
    agent.syncs._disarm()
    runtime.detach()
    print(json.dumps({"step_off": statistics.median(base["step"]), "step_delta": statistics.median(diffs["step"]),
                      "batch_off": statistics.median(base["batch"]),
                      "batch_delta": statistics.median(diffs["batch"]), "hook_body_us": hook_us,
                      "backward_hook_us": backward_us, "item_off_us": item_off, "item_on_us": item_on}), flush=True)


def _per_call_us(fn: object, n: int) -> float:
    start = time.thread_time()
    for _ in range(n):
        fn()  # type: ignore[operator]
    return (time.thread_time() - start) / n * 1e6


# ---------------------------------------------------------------------------------------------
# The parent: windows, attach/detach, table
# ---------------------------------------------------------------------------------------------

class Loop:
    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env={**os.environ, "PYTHONPATH": str(REPO / "src")})
        self.ticks: list[tuple[float, int]] = []
        self.messages: list[str] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("tick "):
                _, t, n = line.split()
                self.ticks.append((float(t), int(n)))
            elif line.startswith("ready"):
                self.ready.set()
            else:
                self.messages.append(line.strip())

    def rate(self, seconds: float) -> float:
        t0, n0 = self.ticks[-1]
        time.sleep(seconds)
        t1, n1 = self.ticks[-1]
        return (n1 - n0) / (t1 - t0)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _attach(loop: Loop, mode: str) -> tuple[object, float]:
    from gpudoctor.agent.client import wait_for_agent
    from gpudoctor.agent.inject import inject

    start = time.monotonic()
    if mode == "inject":
        result = inject(loop.proc.pid, timeout_s=30)
        if not result.ok:
            raise SystemExit(f"injection failed: {result.reason}")
        return result.client, result.elapsed_ms
    loop.send("on")
    client = wait_for_agent(loop.proc.pid, 30)
    if client is None:
        raise SystemExit("the in-process agent did not answer")
    return client, (time.monotonic() - start) * 1e3


def _poll(client: object, stop: threading.Event, seen: list[object]) -> None:
    while not stop.wait(1.0):
        try:
            seen.append(client.stats())  # type: ignore[attr-defined]
        except Exception:
            return


def _attached_window(loop: Loop, mode: str, seconds: float, seen: list[object]) -> tuple[float, float]:
    client, attach_ms = _attach(loop, mode)
    time.sleep(0.5)                                  # let the hooks go in before measuring
    stop = threading.Event()
    poller = threading.Thread(target=_poll, args=(client, stop, seen), daemon=True)
    poller.start()
    rate = loop.rate(seconds)
    stop.set()
    poller.join()
    client.detach()  # type: ignore[attr-defined]
    if mode == "inprocess":
        loop.send("off")
    time.sleep(0.5)
    return rate, attach_ms


def _ci95_pct(off: list[float], on: list[float]) -> tuple[float, float, float]:
    """Change of the mean in %, with a Welch 95 % interval (normal approximation)."""
    m_off, m_on = statistics.mean(off), statistics.mean(on)
    se = math.sqrt(statistics.variance(off) / len(off) + statistics.variance(on) / len(on))
    delta = m_on - m_off
    return 100 * delta / m_off, 100 * (delta - 1.96 * se) / m_off, 100 * (delta + 1.96 * se) / m_off


def main(argv: list[str] | None = None, defaults: dict[str, object] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--model", default="mlp", choices=["mlp", "conv"])
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--threads", type=int, default=1, help="torch CPU threads in the loop")
    p.add_argument("--windows", type=int, default=6, help="windows per state (>= 5)")
    p.add_argument("--window-s", type=float, default=4.0)
    p.add_argument("--mode", default="auto", choices=["auto", "inject", "inprocess"])
    p.add_argument("--micro-steps", type=int, default=3000)
    p.add_argument("--micro-rounds", type=int, default=40)
    p.add_argument("--workers", type=int, default=0, help="DataLoader workers (-1: one per core)")
    p.add_argument("--decode-ms", type=float, default=0.0, help="CPU busy time per sample in the Dataset")
    p.add_argument("--syncs-per-step", type=int, default=0, help=".item() calls per step in the loop")
    p.add_argument("--no-micro", action="store_true", help="skip the per-call micro benchmark")
    p.add_argument("--no-profile", action="store_true", help="skip the 3-step profile window")
    p.add_argument("--json", action="store_true", help="also print the results as one JSON line")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--micro", action="store_true", help=argparse.SUPPRESS)
    if defaults:
        p.set_defaults(**defaults)
    args = p.parse_args(argv)
    if args.mode == "auto":
        try:
            import hypno  # noqa: F401
            args.mode = "inject"
        except ImportError:
            args.mode = "inprocess"
    if args.child:
        _child(args)
        return 0
    if args.micro:
        _micro(args)
        return 0

    common = ["--device", args.device, "--model", args.model, "--width", str(args.width), "--batch",
              str(args.batch), "--threads", str(args.threads), "--mode", args.mode, "--workers", str(args.workers),
              "--decode-ms", str(args.decode_ms), "--syncs-per-step", str(args.syncs_per_step)]
    loop = Loop([sys.executable, __file__, "--child", *common])
    try:
        if not loop.ready.wait(300):
            raise SystemExit("the training loop did not start")
        time.sleep(3.0)                                # warm-up: allocator, caches, clocks
        off: list[float] = []
        on: list[float] = []
        attach_ms: list[float] = []
        seen: list[object] = []
        order = ["off", "on", "on", "off"] * math.ceil(args.windows / 2)
        for state in order[: 2 * args.windows]:
            if state == "off":
                off.append(loop.rate(args.window_s))
            else:
                rate, ms = _attached_window(loop, args.mode, args.window_s, seen)
                on.append(rate)
                attach_ms.append(ms)
        profile = _profile_once(loop, args.mode) if not args.no_profile else {}
    finally:
        loop.stop()
    micro: dict[str, float] = {}
    if not args.no_micro:
        micro_out = subprocess.run([sys.executable, __file__, "--micro", "--micro-steps", str(args.micro_steps),
                                    "--micro-rounds", str(args.micro_rounds)], capture_output=True, text=True,
                                   env={**os.environ, "PYTHONPATH": str(REPO / "src")}, timeout=600)
        micro = json.loads(micro_out.stdout.strip().splitlines()[-1]) if micro_out.returncode == 0 else {}
    _print_table(args, off, on, attach_ms, micro, seen, profile)
    if args.json:
        print(json.dumps({"device": args.device, "model": args.model, "mode": args.mode, "off_steps_per_s": off,
                          "on_steps_per_s": on, "attach_ms": attach_ms, "micro_us": micro, "profile": profile}))
    return 0


def _profile_once(loop: Loop, mode: str) -> dict[str, object]:
    """One 3-step profile window: how long it takes and how big the trace is."""
    client, _ = _attach(loop, mode)
    start = time.monotonic()
    client.profile(steps=3, timeout_s=60)  # type: ignore[attr-defined]
    status = client.wait_profile(120)  # type: ignore[attr-defined]
    took_s = time.monotonic() - start
    client.detach()  # type: ignore[attr-defined]
    if mode == "inprocess":
        loop.send("off")
    size, kernels, steps = 0, 0, 0
    if status.trace_path:
        path = Path(status.trace_path)
        size = path.stat().st_size
        events = json.loads(path.read_text()).get("traceEvents", [])
        kernels = sum(1 for e in events if e.get("cat") == "kernel")
        steps = sum(1 for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
        path.unlink()
    return {"status": status.status, "seconds": round(took_s, 2), "trace_mib": round(size / 2**20, 2),
            "gpu_kernels": kernels, "profiler_steps": steps}


def _print_table(args: argparse.Namespace, off: list[float], on: list[float], attach_ms: list[float],
                 micro: dict[str, float], seen: list[object], profile: dict[str, object]) -> None:
    change, low, high = _ci95_pct(off, on)
    print(f"agent overhead — device {args.device}, model {args.model} (width {args.width}, batch {args.batch}), "
          f"attach by {args.mode}, {len(off)}+{len(on)} interleaved windows of {args.window_s:.0f} s")
    print(f"{'state':<10}{'steps/s mean':>14}{'sd':>8}{'median':>10}{'min':>10}{'max':>10}")
    for name, values in (("detached", off), ("attached", on)):
        print(f"{name:<10}{statistics.mean(values):>14.2f}{statistics.stdev(values):>8.2f}"
              f"{statistics.median(values):>10.2f}{min(values):>10.2f}{max(values):>10.2f}")
    print(f"change of mean steps/s when attached: {change:+.2f} % (95 % CI {low:+.2f} … {high:+.2f} %)")
    print(f"attached throughput: {100 * statistics.mean(on) / statistics.mean(off):.2f} % of detached "
          f"(goal >= 99.5 %)")
    print(f"attach (injection + first answer): median {statistics.median(attach_ms):.0f} ms")
    if micro:
        print(f"step hook body alone: {micro['hook_body_us']:.2f} µs CPU per optimizer.step() (tight loop)")
        print(f"backward-pass boundary body: {micro.get('backward_hook_us', 0):.2f} µs per backward (optimizer loop); "
              f".item() {micro.get('item_off_us', 0):.2f} µs, {micro.get('item_on_us', 0):.2f} µs on a sampled step "
              f"(one step per 0.2 s at most)")
        print(f"paired blocks (thread CPU time), median change: optimizer.step() {micro['step_delta']:+.2f} µs on "
              f"{micro['step_off']:.2f} µs; DataLoader batch {micro['batch_delta']:+.2f} µs on {micro['batch_off']:.2f} µs")
    print(f"machine load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    last = seen[-1] if seen else None
    if last is not None:
        print(f"agent's own reading (last poll): {getattr(last, 'steps_per_s', 0) or 0:.2f} steps/s, "
              f"p50 {getattr(last, 'step_time_p50_ms', 0) or 0:.2f} ms, data wait "
              f"{getattr(last, 'data_wait_pct', 0) or 0:.1f} %, CUDA allocated "
              f"{getattr(last, 'cuda_mem_allocated_mib', None)} MiB")
        print(f"agent's syncs and copies: {getattr(last, 'host_syncs_per_step', None)} host syncs/step "
              f"({getattr(last, 'host_sync_ms_per_step', None)} ms blocked), H2D "
              f"{getattr(last, 'h2d_mib_per_step', None)} MiB/step in {getattr(last, 'h2d_ms_per_step', None)} ms "
              f"host time, {getattr(last, 'h2d_pinned_pct', None)} % pinned; steps from {getattr(last, 'step_source', '?')}")
    if not profile:
        return
    print(f"profile window of 3 steps: {profile['status']} in {profile['seconds']} s, trace {profile['trace_mib']} MiB, "
          f"{profile['profiler_steps']} ProfilerStep ranges, {profile['gpu_kernels']} GPU kernels")


if __name__ == "__main__":
    sys.exit(main())
