"""Shared plumbing for the gpudoctor fault-zoo examples: arguments, device choice, timing, data.

Why this exists: every example is a small training loop with exactly one planted problem and a
``--fix`` that removes it. Everything that is *not* the problem — argument parsing, picking the
device, the synthetic dataset, timing and the final parseable line — lives here, so that each
example file shows the problem and its fix and nothing else.

What it must not do: import anything beyond the standard library and torch (no torchvision, no
numpy, no downloads), or hide a pathology of its own (no syncs, no extra copies in the timed loop).

The final line every example prints is the contract with ``bench/validation/validate_examples.py`` and the
tests::

    gpudoctor-example: steps_per_s=12.34 steps=100 seconds=8.10 device=cpu fix=0 name=input_bound
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

RESULT_PREFIX = "gpudoctor-example:"


def make_parser(description: str) -> argparse.ArgumentParser:
    """The arguments every example accepts; an example may add its own before parsing."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--fix", action="store_true", help="apply the recommended fix")
    parser.add_argument("--steps", type=int, default=100,
                        help="training steps to run; 0 runs until killed (default: 100)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="auto picks CUDA when present (default: auto)")
    parser.add_argument("--warmup-steps", type=int, default=3,
                        help="steps left out of the steps/s figure (default: 3)")
    parser.add_argument("--verbose", action="store_true", help="print a progress line every --print-every steps")
    parser.add_argument("--print-every", type=int, default=20, metavar="N")
    parser.add_argument("--profile-dir", type=Path, default=None,
                        help="write a torch.profiler trace of a few steps here (one file per rank)")
    parser.add_argument("--profile-steps", type=int, default=5, metavar="N",
                        help="steps in the --profile-dir trace (default: 5)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--wait-for-go", action="store_true",
                        help="read one line from stdin before touching the device (the validation starts the "
                             "next example while the current one is timed, and lets it go afterwards)")
    return parser


def pick_device(choice: str) -> torch.device:
    """``auto`` → CUDA when available, else CPU; ``cuda`` without a GPU is a clear error."""
    if choice == "cuda" and not torch.cuda.is_available():
        sys.exit("gpudoctor-example: --device cuda asked for, but torch sees no CUDA GPU.")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(choice)


def healthy_cuda_defaults(device: torch.device, *, tf32: bool = True, cudnn_benchmark: bool = True) -> None:
    """Set what a well-tuned CUDA job sets, so that each example shows only its planted problem.

    TF32 for whatever still runs in fp32, and the cuDNN autotuner (input shapes are fixed). An
    example whose problem is one of these passes it as False. Does nothing on the CPU.
    """
    if device.type != "cuda":
        return
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = cudnn_benchmark


def bf16_autocast(device: torch.device, enabled: bool = True) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA (tensor cores), a null context on the CPU or when not ``enabled``.

    A fresh context per call: use it as ``with bf16_autocast(device):`` inside the step.
    """
    if enabled and device.type == "cuda":
        return torch.autocast(device_type="cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def channels_last(module: nn.Module, device: torch.device) -> nn.Module:
    """A conv net in NHWC on CUDA (what tensor-core convolutions want); unchanged on the CPU."""
    if device.type == "cuda":
        module.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # documented; not in the stubs
    return module


def nhwc(images: torch.Tensor) -> torch.Tensor:
    """A 4-d image batch in channels_last on CUDA (matches :func:`channels_last`); unchanged on the CPU."""
    return images.contiguous(memory_format=torch.channels_last) if images.is_cuda else images


def synchronize(device: torch.device) -> None:
    """Wait for queued GPU work: used only at timing boundaries, never inside the timed loop."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def burn_cpu_ms(milliseconds: float) -> None:
    """Spend real CPU time (a busy loop, not a sleep), like image decoding or augmentation would."""
    end = time.perf_counter() + milliseconds / 1000.0
    acc = 0
    while time.perf_counter() < end:
        for i in range(200):
            acc += i * i
    del acc


class SyntheticImages(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Random images and labels with a configurable per-sample CPU cost (the "decode") and wait (the "read").

    ``io_ms_per_sample`` sleeps, like reading from slow network storage: the loop waits for it just the
    same, but it takes no CPU from the loop, so its share of the step does not depend on the cores.
    Deterministic per index, so the fixed and the unfixed run see the same data.
    """

    def __init__(self, length: int, shape: tuple[int, ...], classes: int, cpu_ms_per_sample: float,
                 io_ms_per_sample: float = 0.0) -> None:
        self.length = length
        self.shape = shape
        self.classes = classes
        self.cpu_ms_per_sample = cpu_ms_per_sample
        self.io_ms_per_sample = io_ms_per_sample

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.io_ms_per_sample > 0:
            time.sleep(self.io_ms_per_sample / 1000.0)
        if self.cpu_ms_per_sample > 0:
            burn_cpu_ms(self.cpu_ms_per_sample)
        gen = torch.Generator().manual_seed(index)
        image = torch.randn(self.shape, generator=gen)
        label = torch.randint(0, self.classes, (), generator=gen)
        return image, label


def forever(loader: torch.utils.data.DataLoader[Any]) -> Iterator[Any]:
    """Iterate a DataLoader epoch after epoch (``--steps 0`` runs until killed)."""
    while True:
        yield from loader


class SmallConvNet(nn.Module):
    """A small ResNet-like conv net (no torchvision): conv-bn-relu blocks, global pool, linear head."""

    def __init__(self, width: int = 32, blocks: int = 3, classes: int = 10, in_channels: int = 3) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv2d(in_channels, width, 3, padding=1, bias=False),
                                   nn.BatchNorm2d(width), nn.ReLU(inplace=True)]
        channels = width
        for block in range(blocks):
            out = channels * 2 if block > 0 else channels
            stride = 2 if block > 0 else 1
            layers += [nn.Conv2d(channels, out, 3, stride=stride, padding=1, bias=False),
                       nn.BatchNorm2d(out), nn.ReLU(inplace=True),
                       nn.Conv2d(out, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU(inplace=True)]
            channels = out
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.head(x)


class MLP(nn.Module):
    """A plain multi-layer perceptron: matmul-heavy, the kind of model autocast/TF32 speed up."""

    def __init__(self, features: int, hidden: int, layers: int, classes: int = 10) -> None:
        super().__init__()
        mods: list[nn.Module] = [nn.Linear(features, hidden), nn.GELU()]
        for _ in range(layers - 1):
            mods += [nn.Linear(hidden, hidden), nn.GELU()]
        mods.append(nn.Linear(hidden, classes))
        self.net = nn.Sequential(*mods)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@dataclass
class RunResult:
    steps: int
    timed_steps: int
    seconds: float

    @property
    def steps_per_s(self) -> float:
        return self.timed_steps / self.seconds if self.seconds > 0 else 0.0


class _Stop:
    """Turns SIGTERM/SIGINT into a clean stop so the final result line is still printed."""

    def __init__(self) -> None:
        self.requested = False
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(ValueError):  # not the main thread: leave signals alone
                signal.signal(sig, self._handler)

    def _handler(self, signum: int, frame: object) -> None:
        self.requested = True


def _profiler(args: argparse.Namespace, device: torch.device, rank: int) -> Any:
    """A torch.profiler schedule over a few steps after warm-up, or a null context."""
    if args.profile_dir is None:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile, schedule

    args.profile_dir.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    name = getattr(args, "example_name", "example")

    def export(prof: Any) -> None:
        prof.export_chrome_trace(str(args.profile_dir / f"{name}_rank{rank}.json"))

    return profile(activities=activities, schedule=schedule(wait=1, warmup=2, active=max(1, args.profile_steps), repeat=1),
                   on_trace_ready=export, record_shapes=False)


def run_steps(args: argparse.Namespace, device: torch.device, step: Callable[[int], None],
              rank: int = 0) -> RunResult:
    """Run ``step(i)`` ``args.steps`` times (forever when 0), timing all but the warm-up steps.

    Stops cleanly on SIGTERM/SIGINT; progress goes to stderr only with ``--verbose``.
    """
    stop = _Stop()
    total = args.steps
    warmup = min(args.warmup_steps, max(total - 1, 0)) if total > 0 else args.warmup_steps
    done = 0
    t_start = time.perf_counter()
    t_timed = t_start
    last_print = t_start
    with _profiler(args, device, rank) as prof:
        while (total == 0 or done < total) and not stop.requested:
            step(done)
            done += 1
            if prof is not None:
                prof.step()
            if done == warmup:
                synchronize(device)
                t_timed = time.perf_counter()
            if args.verbose and done % max(args.print_every, 1) == 0:
                now = time.perf_counter()
                rate = args.print_every / (now - last_print) if now > last_print else 0.0
                last_print = now
                print(f"step {done}: {rate:.2f} steps/s", file=sys.stderr, flush=True)
    synchronize(device)
    t_end = time.perf_counter()
    if done <= warmup:
        return RunResult(done, done, t_end - t_start)
    return RunResult(done, done - warmup, t_end - t_timed)


def report(name: str, args: argparse.Namespace, device: torch.device, result: RunResult,
           **extra: object) -> None:
    """Print the one parseable result line on stdout."""
    fields = {"steps_per_s": f"{result.steps_per_s:.3f}", "steps": result.steps,
              "seconds": f"{result.seconds:.3f}", "device": device.type, "fix": int(args.fix),
              "name": name, "pid": os.getpid()}
    fields.update({k: v for k, v in extra.items()})
    print(RESULT_PREFIX + " " + " ".join(f"{k}={v}" for k, v in fields.items()), flush=True)


def parse_result_line(text: str) -> dict[str, str] | None:
    """The fields of the last ``gpudoctor-example:`` line in ``text`` (None when there is none)."""
    for line in reversed(text.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return dict(part.split("=", 1) for part in line[len(RESULT_PREFIX):].split() if "=" in part)
    return None


def _exit_with_parent() -> None:
    """Linux: get SIGTERM when the process that started us exits, so a killed validation run leaves
    no job training on the GPU (``--wait-for-go`` only; best effort)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def setup(args: argparse.Namespace, name: str) -> torch.device:
    """Seed, pick the device and remember the example's name (for trace file names)."""
    args.example_name = name
    if getattr(args, "wait_for_go", False):
        _exit_with_parent()
        if not sys.stdin.readline():  # held after the imports, before any device work
            sys.exit("gpudoctor-example: stdin closed before the go line; not starting.")
    torch.manual_seed(args.seed)
    device = pick_device(args.device)
    if device.type == "cpu":
        # Leave one core to gpudoctor and the DataLoader workers on small machines.
        torch.set_num_threads(max(1, min(4, (os.cpu_count() or 2) - 1)))
    return device
