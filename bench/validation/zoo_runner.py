"""Running fault-zoo examples and gpudoctor commands for ``validate_examples.py``: jobs, timing, records.

Why this exists: the validation script reads as a sequence of measurements; the plumbing behind
them — a job held until its turn, step rates from its progress lines, subprocesses with hard
timeouts, the per-variant record — lives here so that it can be unit-tested without a GPU
(tests/examples/test_validation_helpers.py).

What it must not do: import torch or gpudoctor (it drives both as subprocesses), or let any
subprocess outlive its timeout.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "examples"
sys.path.insert(0, str(EXAMPLES_DIR))
from zoo import Example  # noqa: E402

PROGRESS = re.compile(r"^step (\d+): ")
GD = [sys.executable, "-m", "gpudoctor"]


@dataclass(frozen=True)
class Settings:
    """Window lengths (seconds) and device for one validation run."""

    cpu: bool
    device: str
    print_every: int
    warm_s: float          # wait this long for the first progress lines after "go"
    baseline_s: float      # one "alone" window
    passive_s: float       # attach --duration for the passive watch (unfixed: the overhead is measured)
    passive_fixed_s: float  # the same after --fix (findings and step samples only)
    settle_s: float        # left out at the start of the passive watch (agent injection)
    profile_attach_s: float
    profile_attach_fixed_s: float
    min_example_s: float   # do not start an example with less budget left than this

    @classmethod
    def for_mode(cls, cpu: bool) -> Settings:
        if cpu:  # a loaded 2-core VM: a few steps per second
            return cls(True, "cpu", 2, 120.0, 4.0, 8.0, 8.0, 2.0, 8.0, 8.0, 60.0)
        return cls(False, "auto", 5, 120.0, 1.0, 4.0, 3.0, 1.5, 3.0, 3.0, 25.0)


class Budget:
    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def timeout(self, wanted_s: float) -> float:
        """``wanted_s``, but never past the budget by more than a grace period (at least 1 s)."""
        return max(1.0, min(wanted_s, self.left() + 20.0))


def run_cmd(cmd: list[str], timeout_s: float, cwd: Path = REPO) -> tuple[int, str, str]:
    """Run a command with a hard timeout; (rc, stdout, stderr), rc 124 on timeout."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
        return proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out, f"timed out after {timeout_s:.0f}s"
    except OSError as exc:
        return 127, "", str(exc)


def gd_json(args: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, str]:
    """``gpudoctor ARGS`` → (parsed JSON, "") or (None, one line saying what went wrong)."""
    rc, out, err = run_cmd([*GD, *args], timeout_s)
    try:
        return json.loads(out), ""
    except json.JSONDecodeError:
        tail = (err.strip().splitlines() or [f"rc={rc}"])[-1]
        return None, f"rc={rc}: {tail[:160]}"


def codes_of(report: dict[str, Any] | None, info_ok: frozenset[str] = frozenset()) -> set[str]:
    """Codes of the report's findings at warning or above: an ``info`` finding (a GPU at its power cap
    under full load, a note) is information, not a diagnosis, so it is neither a hit nor a false positive.
    ``info_ok``: codes that count at info too — for ``check``, the example's planted ones (a static rule
    has no estimate, its severity is the rule's own: GD208 is info, only a run with and without the
    autotuner says what it gains; the 4 Dec H200 run missed it for that alone)."""
    return {f["code"] for f in (report or {}).get("findings", [])
            if isinstance(f, dict) and "code" in f and (f.get("severity") != "info" or f["code"] in info_ok)}


class Job:
    """An example running with ``--steps 0 --verbose --wait-for-go``; progress lines are timestamped.

    Started ahead of its turn, it imports torch and then waits on stdin: :meth:`go` lets it touch
    the device and train.
    """

    def __init__(self, example: Example, fix: bool, settings: Settings) -> None:
        self.name = f"{example.name}{' --fix' if fix else ''}"
        cmd = [sys.executable, f"{example.name}.py", "--steps", "0", "--verbose", "--print-every",
               str(settings.print_every), "--device", settings.device, "--wait-for-go",
               *(["--fix"] if fix else []), *(example.cpu_args if settings.cpu else ())]
        self.proc = subprocess.Popen(cmd, cwd=EXAMPLES_DIR, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.progress: list[tuple[float, int]] = []
        self.stderr_tail: list[str] = []
        self.stdout = ""
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def go(self) -> None:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.write("go\n")
                self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            m = PROGRESS.match(line)
            if m:
                self.progress.append((time.monotonic(), int(m.group(1))))
            else:
                self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-20:]

    def wait_warm(self, timeout_s: float, lines: int = 2) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end and self.alive():
            if len(self.progress) >= lines:
                return True
            time.sleep(0.05)
        return len(self.progress) >= lines

    def rate(self, t0: float, t1: float) -> float | None:
        """Steps per second between the first and last progress line inside [t0, t1]."""
        return rate_between(self.progress, t0, t1)

    def window_rate(self, seconds: float) -> float | None:
        """Wait ``seconds`` (longer for a slow job, until two progress lines fall inside) and measure."""
        t0 = time.monotonic()
        time.sleep(seconds)
        while self.rate(t0, time.monotonic()) is None and time.monotonic() - t0 < 3 * seconds and self.alive():
            time.sleep(0.1)
        return self.rate(t0, time.monotonic())

    def stop(self) -> dict[str, str] | None:
        """SIGTERM (the example prints its result line and exits), SIGKILL after 20 s."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # a job still held reads EOF and goes on to its SIGTERM
        try:
            self.stdout, _ = self.proc.communicate(timeout=20)
        except (subprocess.TimeoutExpired, ValueError):
            self.proc.kill()
            with contextlib.suppress(Exception):
                self.stdout, _ = self.proc.communicate(timeout=10)
        from _common import parse_result_line

        return parse_result_line(self.stdout or "")


def rate_between(progress: list[tuple[float, int]], t0: float, t1: float) -> float | None:
    inside = [(t, n) for t, n in progress if t0 <= t <= t1]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


@dataclass
class Variant:
    """What was measured on one run of an example (unfixed or ``--fix``)."""

    fix: bool
    codes: set[str] = field(default_factory=set)
    ttff_s: float | None = None
    warm_s: float | None = None
    rate_alone: float | None = None
    rate_alone_after: float | None = None
    rate_passive: float | None = None
    rate_profile: float | None = None
    step_samples: int = 0
    phases: str = ""       # where the time went (printed, for tuning the one-run budget)
    report_path: Path | None = None
    errors: list[str] = field(default_factory=list)
    pending: list[cf.Future[Any]] = field(default_factory=list)

    @property
    def rate_alone_mean(self) -> float | None:
        rates = [r for r in (self.rate_alone, self.rate_alone_after) if r]
        return sum(rates) / len(rates) if rates else None


@dataclass
class Row:
    example: Example
    variants: dict[bool, Variant] = field(default_factory=dict)
    compare: dict[str, Any] | None = None
    static: cf.Future[tuple[set[str], set[str], str]] | None = None
    skipped: str = ""


FIX_BLOCK = re.compile(r"^\s*# gpudoctor-fix: begin\n.*?^\s*# gpudoctor-fix: end\n", re.S | re.M)


def static_codes(ex: Example, workdir: Path) -> tuple[set[str], set[str], str]:
    """``check`` on the script without its marked fix block (unfixed) and as shipped (fixed)."""
    source = (EXAMPLES_DIR / f"{ex.name}.py").read_text()
    unfixed_dir = workdir / f"static_{ex.name}"
    unfixed_dir.mkdir(exist_ok=True)
    (unfixed_dir / f"{ex.name}.py").write_text(FIX_BLOCK.sub("", source))
    unfixed, err1 = gd_json(["check", str(unfixed_dir / f"{ex.name}.py"), "--format", "json"], 60)
    fixed, err2 = gd_json(["check", str(EXAMPLES_DIR / f"{ex.name}.py"), "--format", "json"], 60)
    planted = frozenset(ex.expected)
    return codes_of(unfixed, planted), codes_of(fixed, planted), err1 or err2


def environment(cpu: bool) -> dict[str, str]:
    env = {"date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "python": sys.version.split()[0]}
    # runs next to the first example: torch's versions only, no CUDA context (a second process on
    # the GPU would be reported as such, GD703); the GPU's name comes from nvidia-smi
    rc, out, _ = run_cmd([sys.executable, "-c", "import torch;print(torch.__version__, 'CUDA', torch.version.cuda)"],
                         180)
    env["torch"] = out.strip() if rc == 0 else "not importable"
    rc, out, _ = run_cmd(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"], 15)
    env["gpu"] = out.strip().replace("\n", "; ") if rc == 0 and not cpu else ("CPU mode" if cpu else "nvidia-smi failed")
    rc, out, _ = run_cmd([*GD, "--version"], 30)
    env["gpudoctor"] = out.strip() or "not importable"
    env["cpus"] = str(os.cpu_count())
    env["load average at start"] = " ".join(f"{x:.1f}" for x in os.getloadavg())
    return env
