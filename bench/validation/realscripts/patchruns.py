"""Copies of a third-party script with one code change each: timed without a tool, and diagnosed.

Why this exists: some scripts express gpudoctor's fixes through no flag (DCGAN's persistent workers, a
``.item()`` in the step, accelerate's cv_example's worker count). Their harnesses
(``dcgan_validation.py``, ``accelerate_cv_validation.py``) write a copy of the script per variant with
text edits, time each copy from its own progress lines with no tool in the process (``plain_rate``),
and run some under ``gpudoctor run`` (``diagnose``). What differs per script — the edits, the command
line, the progress line's pattern — stays in the harness.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from . import procs, reportread


def patched(src: str, edits: list[tuple[str, str]], what: str) -> str:
    """``src`` with each ``(old, new)`` edit applied; exits naming ``what`` when ``old`` is missing."""
    for old, new in edits:
        if old not in src:
            raise SystemExit(f"{what} has no {old!r}: not the pinned commit")
        src = src.replace(old, new)
    return src


class CpuSampler(threading.Thread):
    """Once a second: the machine's CPU use and that of ``root``'s process tree, by kind of process.

    Kept only after ``warmup_s``. A process is the trainer when it has Python children that are copies
    of it (its DataLoader workers), a worker when it is such a copy; the rest (a launcher, compile
    workers) is "other". Cores are CPU-seconds per second.
    """

    def __init__(self, root: int, warmup_s: float) -> None:
        super().__init__(daemon=True)
        self.root, self.warmup_s = root, warmup_s
        self.samples: list[dict[str, float]] = []
        self._halt = threading.Event()

    def run(self) -> None:
        import psutil

        started = time.monotonic()
        known: dict[int, Any] = {}
        psutil.cpu_percent(None)
        while not self._halt.wait(1.0):
            try:
                tree = [psutil.Process(self.root), *psutil.Process(self.root).children(recursive=True)]
            except psutil.Error:
                continue
            cores = {"trainer": 0.0, "workers": 0.0, "other": 0.0}
            n_workers = 0
            for p in tree:
                try:
                    q = known.setdefault(p.pid, p)
                    pct = q.cpu_percent(None)
                    cmd = q.cmdline()
                    parent_cmd = psutil.Process(q.ppid()).cmdline()
                    copies = [c for c in q.children() if c.cmdline() == cmd]
                except psutil.Error:
                    continue
                kind = "workers" if cmd == parent_cmd else "trainer" if copies else "other"
                n_workers += kind == "workers"
                cores[kind] += pct / 100.0
            host = psutil.cpu_percent(None)
            if time.monotonic() - started >= self.warmup_s:
                self.samples.append({**cores, "n_workers": n_workers, "host_pct": host})

    def stop(self) -> dict[str, Any]:
        """The means over the kept samples (skipping each process's first, zero, reading)."""
        import psutil

        self._halt.set()
        self.join(timeout=3.0)
        kept = self.samples[1:]
        if not kept:
            return {}
        out: dict[str, Any] = {k: round(sum(s[k] for s in kept) / len(kept), 2) for k in kept[0]}
        out.update(samples=len(kept), logical_cpus=psutil.cpu_count(), physical_cpus=psutil.cpu_count(logical=False))
        return out


def plain_rate(cmd: list[str], cwd: Path, progress: re.Pattern[bytes], seconds: float, warmup_s: float,
               env: dict[str, str] | None = None, sample_cpu: bool = False) -> dict[str, Any]:
    """Iterations/s of ``cmd`` alone: its progress lines timed as they arrive, after ``warmup_s``.

    ``progress`` matches a line and captures (epoch, iteration, iterations per epoch); the count is
    ``epoch * per_epoch + iteration``, so epoch ends (evaluation, worker restarts) are inside the rate.
    ``sample_cpu``: also the CPU use over the timed part (:class:`CpuSampler`), as ``cpu``.
    """
    env = dict(env or os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, process_group=0)
    procs._LIVE_GROUPS.add(proc.pid)
    sampler = CpuSampler(proc.pid, warmup_s) if sample_cpu else None
    if sampler is not None:
        sampler.start()
    marks: list[tuple[float, int]] = []
    started = time.monotonic()
    tail: list[bytes] = []
    watchdog = threading.Timer(warmup_s + seconds + 60.0, procs.kill_group, (proc.pid, 1.0))  # a hung script
    watchdog.start()
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            now = time.monotonic() - started
            tail = (tail + [line])[-5:]
            m = progress.match(line)
            if m and now >= warmup_s:
                epoch, i, per_epoch = (int(x) for x in m.groups())
                marks.append((now, epoch * per_epoch + i))
            if now > warmup_s + seconds:
                break
    finally:
        watchdog.cancel()
        cpu = sampler.stop() if sampler is not None else None
        procs.kill_group(proc.pid, grace_s=3.0, leader=proc)
    extra = {"cpu": cpu} if cpu is not None else {}
    if len(marks) < 2:
        return {"it_per_s": None, "log_tail": b"".join(tail).decode(errors="replace"), **extra}
    (t0, i0), (t1, i1) = marks[0], marks[-1]
    return {"it_per_s": round((i1 - i0) / (t1 - t0), 2), "iterations": i1 - i0, "seconds": round(t1 - t0, 1),
            **extra}


def diagnose(gpudoctor: list[str], cmd: list[str], cwd: Path, duration: float, work: Path, name: str,
             keep: Path, batch: int, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``gpudoctor run --duration`` on ``cmd``: the report read by :mod:`.reportread`, its raw findings,
    and the profile window's trace kept in ``keep`` as ``<name>.pt.trace.json.gz`` (a test input)."""
    report = work / f"{name}.report.json"
    log = work / f"{name}.gd.log"
    report.unlink(missing_ok=True)
    run = [*gpudoctor, "run", "--duration", f"{duration:g}", "--format", "json", "-o", str(report),
           "--no-dashboard", "--fail-on", "critical", "--", *cmd]
    res = procs.run_until_report(run, cwd, dict(env or os.environ, PYTHONUNBUFFERED="1"), report, log,
                                 timeout_s=duration + 90.0)
    try:
        data = json.loads(report.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"no report ({exc})", "log_tail": res.log[-2000:]}
    kinds = reportread.fix_kind_map(Path(__file__).resolve().parents[3] / "rules")
    out = reportread.read_report(data, kinds, batch)
    out["raw_findings"] = data.get("findings", [])
    out["target_pid"] = data.get("target_pid")
    for found in sorted(set(re.findall(r"/[^\s\"']+\.pt\.trace\.json", report.read_text()))):
        with contextlib.suppress(OSError):
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{name}.pt.trace.json.gz").write_bytes(gzip.compress(Path(found).read_bytes()))
            out["trace_kept"] = f"{name}.pt.trace.json.gz"
    return out


def print_findings(diag: dict[str, Any]) -> None:
    """One line per finding (severity, code, estimate, cost), then the agent's rate and the verdict."""
    for f in diag.get("findings", []):
        imp = f.get("impact") or {}
        print(f"    {f['severity']:8s} {f['code']} {f['name']}: est {imp.get('est_speedup_low')}"
              f"–{imp.get('est_speedup_high')} cost {imp.get('cost_pct_of_step')}%", flush=True)
    print(f"    agent steps/s {diag.get('steps_per_s')} bound {(diag.get('bottleneck') or {}).get('label')}"
          f" data_wait {diag.get('data_wait_pct')} {diag.get('error') or ''}", flush=True)


def variant_of(name: str) -> str:
    """The variant a run's name names: ``as_is#2`` is ``as_is`` run again in the same call."""
    return name.split("#", 1)[0]


def print_rate_table(results: dict[str, Any], baseline: str) -> None:
    """Each run's it/s and its ratio to the mean of the ``baseline`` variant's runs."""
    base_rates = [rec["plain"]["it_per_s"] for name, rec in results.items()
                  if variant_of(name) == baseline and rec["plain"].get("it_per_s")]
    base = round(sum(base_rates) / len(base_rates), 2) if base_rates else None
    print(f"\n| variant | it/s (no tool) | × {baseline} ({base}) |\n|---|---|---|")
    for name, rec in results.items():
        rate = rec["plain"].get("it_per_s")
        print(f"| {name} | {rate} | {round(rate / base, 2) if rate and base else '-'} |")


def measure(name: str, cmd: list[str], cwd: Path, progress: re.Pattern[bytes], seconds: float, warmup_s: float,
            diagnose_s: float | None, gpudoctor: list[str], work: Path, keep: Path, prefix: str, batch: int,
            sample_cpu: bool = False) -> dict[str, Any]:
    """One run of a variant: timed alone (``plain``), then under ``gpudoctor run`` for ``diagnose_s``
    seconds when given (``gpudoctor``), each printed as it ends."""
    rec = plain_rate(cmd, cwd, progress, seconds, warmup_s, sample_cpu=sample_cpu)
    print(f"{time.strftime('%H:%M:%S')} plain {name}: {rec}", flush=True)
    out: dict[str, Any] = {"plain": rec, "command": cmd[1:]}
    if diagnose_s is not None:
        diag = diagnose(gpudoctor, cmd, cwd, diagnose_s, work, f"{prefix}_{name.replace('#', '_')}", keep, batch)
        out["gpudoctor"] = diag
        print(f"    watched PID {diag.get('target_pid')}", flush=True)
        print_findings(diag)
    return out
