"""Where the training process's main thread spends its time, from py-spy stack samples.

py-spy reads the target's memory from outside (ptrace rights needed), so it works on any CPython
process without touching its code. We sample in rolling windows with ``py-spy record --nonblocking
--idle --threads --format raw --duration N`` (``--nonblocking`` never pauses the target) and turn
the main thread's stacks into shares per activity: data loading, forward, backward, optimizer, host
synchronisation, checkpoint saving, logging, other.

Check the numbers by hand: ``py-spy dump --pid <pid>`` (one stack) or
``py-spy record --pid <pid> --idle --format raw --duration 5 -o out.txt``.

This module must not import torch, textual or rich; it never blocks the caller for longer than
the window plus a small timeout, and a failing py-spy yields ``None`` plus one logged hint.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from gpudoctor.live.priority import SAMPLER_NICE, observer_child_setup
from gpudoctor.live.samples import StackSample

log = logging.getLogger("gpudoctor.live.stacks")

ACTIVITIES = ("data_loading", "forward", "backward", "optimizer", "host_sync", "checkpoint", "logging",
              "gpudoctor_agent", "other")

_FRAME_RE = re.compile(r"^(?P<fn>.*) \((?P<file>[^()]*):(?P<line>\d+)\)$")
_THREAD_RE = re.compile(r"^thread \((?P<tid>\d+)\)(?:: (?P<name>.*))?$")
# Source text that makes the host wait for the GPU (py-spy cannot see C methods like .item(),
# so we read the user's line the leaf frame points at).
_SYNC_TEXT_RE = re.compile(r"\.(item|cpu|tolist|numpy)\(\)|synchronize\(|\.nonzero\(|torch\.equal\(")
_SYNC_FUNCS = ("synchronize", "Event.synchronize", "Stream.synchronize", "Tensor.item", "Tensor.tolist")


def find_pyspy() -> str | None:
    """The py-spy binary: next to our interpreter (a venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "py-spy"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("py-spy")


def _classify(frames: list[tuple[str, str, int]], read_line: _LineReader | None) -> str:
    """One activity for one stack; ``frames`` run from the root to the leaf.

    Frames of gpudoctor's own agent are transparent when they only wrap the user's work (the
    DataLoader hook): the stack counts as ``gpudoctor_agent`` only when nothing recognisable runs
    below the agent's deepest frame (its start-up imports, a profile export).
    """
    agent_at = [i for i, (_, f, _) in enumerate(frames) if "/gpudoctor/agent/" in f]
    if agent_at:
        below = frames[agent_at[-1] + 1:]
        if not below or _classify_plain(below, None) == "other":
            return "gpudoctor_agent"
        frames = [fr for fr in frames if "/gpudoctor/agent/" not in fr[1]]
    return _classify_plain(frames, read_line)


def _classify_plain(frames: list[tuple[str, str, int]], read_line: _LineReader | None) -> str:
    names = [fn for fn, _, _ in frames]
    files = [f for _, f, _ in frames]
    leaf_fn, leaf_file, leaf_line = frames[-1] if frames else ("", "", 0)
    if any(n.endswith(_SYNC_FUNCS) or n == "synchronize" for n in names[-3:]):
        return "host_sync"
    if read_line is not None and "site-packages" not in leaf_file and "/torch/" not in leaf_file:
        text = read_line(leaf_file, leaf_line)
        if text and _SYNC_TEXT_RE.search(text):
            return "host_sync"
    if any(n in ("save", "_save") and "serialization" in f for n, f in zip(names, files)) or any(
        "checkpoint" in n.lower() and "save" in n.lower() for n in names
    ):
        return "checkpoint"
    if any("torch/utils/data/" in f or n.endswith("__getitem__") or n.endswith("__getitems__")
           for n, f in zip(names, files)):
        return "data_loading"
    if any("torch/optim/" in f or n.startswith(("Optimizer.", "_use_grad_for_differentiable"))
           for n, f in zip(names, files)):
        return "optimizer"
    if any(n in ("Tensor.backward", "backward", "_engine_run_backward") and ("autograd" in f or "_tensor" in f)
           for n, f in zip(names, files)):
        return "backward"
    if any(n in ("Module._call_impl", "Module._wrapped_call_impl") for n in names):
        return "forward"
    if any(f.endswith(("logging/__init__.py", "tensorboard/writer.py")) or "wandb" in f or n == "print"
           for n, f in zip(names, files)):
        return "logging"
    del leaf_fn
    return "other"


class _LineReader:
    """Reads the source line a frame points at, through the target's root (containers)."""

    def __init__(self, pid: int | None) -> None:
        self._root = f"/proc/{pid}/root" if pid else ""
        self._cache: dict[str, list[str] | None] = {}

    def __call__(self, path: str, line: int) -> str | None:
        if not os.path.isabs(path):
            return None
        lines = self._cache.get(path, ...)
        if lines is ...:
            lines = None
            for candidate in (self._root + path, path):
                try:
                    with open(candidate, encoding="utf-8", errors="replace") as fh:
                        lines = fh.read().splitlines()
                    break
                except OSError:
                    continue
            self._cache[path] = lines
        if lines is None or not 0 < line <= len(lines):
            return None
        return lines[line - 1]


def parse_raw(text: str, pid: int | None = None, window_s: float = 0.0,
              timestamp: float | None = None, read_sources: bool = True) -> StackSample:
    """Turn py-spy ``--format raw`` output into activity shares of the main thread.

    The main thread is the one whose OS thread id equals ``pid`` (``--threads`` output), or, in
    output without thread ids, the stacks rooted at ``<module>``.
    """
    reader = _LineReader(pid) if read_sources else None
    per_activity: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    total = 0
    for raw in text.splitlines():
        stack_text, _, count_text = raw.rstrip().rpartition(" ")
        if not stack_text or not count_text.isdigit():
            continue
        parts = stack_text.split(";")
        if not _is_main_thread(parts, pid):
            continue
        frames = []
        for part in parts:
            m = _FRAME_RE.match(part)
            if m:
                frames.append((m["fn"], m["file"], int(m["line"])))
        if not frames:
            continue
        count = int(count_text)
        total += count
        per_activity[_classify(frames, reader)] += count
        fn, file, line = frames[-1]
        leaves[f"{os.path.basename(file)}:{line} {fn}"] += count
    shares = {a: round(100.0 * per_activity[a] / total, 1) for a in ACTIVITIES} if total else {}
    top = tuple((name, round(100.0 * n / total, 1)) for name, n in leaves.most_common(5)) if total else ()
    return StackSample(timestamp=timestamp or time.time(), window_s=window_s, samples=total,
                       share_pct=shares, top_frames=top)


def _is_main_thread(parts: list[str], pid: int | None) -> bool:
    m = _THREAD_RE.match(parts[0])
    if m:
        if pid is not None and int(m["tid"]) == pid:
            return True
        return m["name"] == "MainThread" or (len(parts) > 1 and parts[1] == "MainThread")
    return parts[0].startswith("<module> (")


class PySpyUnavailable(Exception):
    """py-spy is missing or may not read the target (one sentence in ``str``)."""


def probe(pid: int) -> str | None:
    """Return ``None`` when py-spy can read ``pid``, else one sentence saying why not (≤ 5 s)."""
    binary = find_pyspy()
    if binary is None:
        return "py-spy is not installed: pip install py-spy."
    try:
        proc = subprocess.run([binary, "dump", "--pid", str(pid), "--nonblocking"], capture_output=True,
                              text=True, timeout=5, preexec_fn=observer_child_setup(SAMPLER_NICE))
    except subprocess.TimeoutExpired:
        return "py-spy did not answer within 5 s."
    except OSError as exc:
        return f"py-spy could not start: {exc.strerror}."
    if proc.returncode != 0:
        return _explain_failure(proc.stderr)
    return None


def _explain_failure(stderr: str) -> str:
    low = stderr.lower()
    if "permission" in low or "operation not permitted" in low:
        return ("py-spy may not read the process (ptrace refused): run as the same user or root, or grant "
                "CAP_SYS_PTRACE / set kernel.yama.ptrace_scope=0.")
    if "failed to find python" in low or "python version" in low or "not a python" in low:
        return "py-spy found no Python interpreter in the process."
    if "no such process" in low or "failed to open process" in low:
        return "the process is gone."
    line = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "unknown error")
    return f"py-spy failed: {line[:160]}."


def record_window(pid: int, window_s: float, rate_hz: int = 50, binary: str | None = None,
                  stop: threading.Event | None = None) -> StackSample:
    """Sample ``pid`` for ``window_s`` seconds without pausing it; raise PySpyUnavailable on failure.

    Setting ``stop`` ends the window early (py-spy is interrupted and writes what it has).
    """
    binary = binary or find_pyspy()
    if binary is None:
        raise PySpyUnavailable("py-spy is not installed: pip install py-spy.")
    fd, out_path = tempfile.mkstemp(prefix="gpudoctor-pyspy-", suffix=".txt")
    os.close(fd)
    cmd = [binary, "record", "--pid", str(pid), "--nonblocking", "--idle", "--threads", "--full-filenames",
           "--format", "raw", "--rate", str(rate_hz), "--duration", str(max(1, round(window_s))),
           "--output", out_path]
    started = time.monotonic()
    try:
        # Niced like the session's threads (live/priority.py): py-spy waits for a core, never takes one;
        # and it dies with gpudoctor (observer_child_setup).
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                preexec_fn=observer_child_setup(SAMPLER_NICE))
        deadline = started + window_s + 10
        while proc.poll() is None:
            if (stop is not None and stop.wait(0.1)) or time.monotonic() > deadline:
                proc.send_signal(signal.SIGINT)
                try:
                    proc.wait(timeout=3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
                break
            if stop is None:
                time.sleep(0.1)
        stderr = proc.stderr.read() if proc.stderr else ""
        with open(out_path, encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        if proc.returncode not in (0, -signal.SIGINT) and not text:
            raise PySpyUnavailable(_explain_failure(stderr))
    finally:
        try:
            os.unlink(out_path)
        except OSError:
            pass
    return parse_raw(text, pid=pid, window_s=time.monotonic() - started)
