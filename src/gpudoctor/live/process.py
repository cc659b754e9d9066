"""The training process and its children, read from outside through psutil and /proc.

Gives the target's CPU %, RSS, threads, CPU affinity, cgroup CPU quota, its DataLoader workers
(children that run Python), the environment variables that matter for performance (NCCL_*, CUDA_*,
OMP_NUM_THREADS, PYTORCH_CUDA_ALLOC_CONF …), its command line, Python version and rank variables.

Check by hand: ``ps -o pid,pcpu,rss,nlwp --ppid <pid>``, ``taskset -p <pid>``,
``cat /proc/<pid>/cgroup`` and ``tr '\\0' '\\n' < /proc/<pid>/environ``.

Never raises on a missing field: what cannot be read is ``None``. The target is only read, never
signalled. :func:`check_target` turns a bad PID into a :class:`~gpudoctor.exitcodes.UserError`.
"""

from __future__ import annotations

import logging
import os
import re
import time

import psutil

from gpudoctor.agent.paths import process_stopped
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live import ranks
from gpudoctor.live.samples import ProcessSample, WorkerSample

log = logging.getLogger("gpudoctor.live.process")

_ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "OMP_", "MKL_", "TORCHINDUCTOR_")
_ENV_NAMES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
              "TF32_OVERRIDE", "NVIDIA_TF32_OVERRIDE")
_PY_VERSION_RE = re.compile(r"python(\d)\.(\d+)")


def check_target(pid: int) -> psutil.Process:
    """Return the process for ``pid`` or raise a one-sentence UserError with a distinct exit code."""
    try:
        proc = psutil.Process(pid)
        proc.cmdline()
        status = proc.status()
    except psutil.NoSuchProcess:
        raise UserError(f"no process with PID {pid} exists (check the PID with `ps aux | grep python`).",
                        ExitCode.NO_SUCH_PROCESS) from None
    except psutil.AccessDenied:
        raise UserError(f"not permitted to inspect PID {pid}: it belongs to another user (run gpudoctor as "
                        "that user or as root).", ExitCode.NOT_PERMITTED) from None
    if status == psutil.STATUS_ZOMBIE:
        raise UserError(f"PID {pid} has already exited (it is a zombie).", ExitCode.NO_SUCH_PROCESS)
    if os.geteuid() != 0:
        try:
            if proc.uids().real != os.getuid():
                raise UserError(f"not permitted to inspect PID {pid}: it belongs to another user (run "
                                "gpudoctor as that user or as root).", ExitCode.NOT_PERMITTED)
        except psutil.Error:
            pass
    if python_version(proc) is None:
        raise UserError(f"PID {pid} ({proc.name()}) is not a Python process: attach to the Python "
                        "training process itself (see `ps -o pid,cmd --ppid <launcher pid>`).",
                        ExitCode.NOT_PYTHON)
    return proc


def python_version(proc: psutil.Process) -> str | None:
    """``"3.11"`` when the process runs a CPython interpreter (from its mapped libraries or exe)."""
    candidates: list[str] = []
    try:
        candidates.append(os.path.basename(os.path.realpath(proc.exe())))
    except (psutil.Error, OSError):
        pass
    try:
        with open(f"/proc/{proc.pid}/maps", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "python" in line:
                    candidates.append(os.path.basename(line.rsplit(" ", 1)[-1].strip()))
    except OSError:
        pass
    for name in candidates:
        m = _PY_VERSION_RE.search(name)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    return None


def read_environ(pid: int) -> dict[str, str]:
    """The performance-relevant part of the process's start-up environment ({} if unreadable)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return {}
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.decode("utf-8", "replace").partition("=")
        if sep and (key.startswith(_ENV_PREFIXES) or key in _ENV_NAMES):
            env[key] = value
    return env


def cgroup_cpu_quota(pid: int) -> float | None:
    """CPUs the target's cgroup may use (cgroup v2 ``cpu.max`` / v1 ``cfs_quota``), None if unlimited."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            for candidate in (f"/sys/fs/cgroup{path}/cpu.max", "/sys/fs/cgroup/cpu.max"):
                try:
                    quota, period = _read(candidate).split()[:2]
                except (OSError, ValueError):
                    continue
                return None if quota == "max" else int(quota) / int(period)
        elif "cpu" in controllers.split(","):
            base = f"/sys/fs/cgroup/{controllers}{path}"
            try:
                quota_us = int(_read(f"{base}/cpu.cfs_quota_us"))
                period_us = int(_read(f"{base}/cpu.cfs_period_us"))
            except (OSError, ValueError):
                continue
            return None if quota_us <= 0 else quota_us / period_us
    return None


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class ProcessCollector:
    """Samples the target and its children. Call :meth:`sample` about once a second.

    CPU % needs two readings; the first sample reports ``None`` for CPU.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._procs: dict[int, psutil.Process] = {}
        self._static: dict[str, object] | None = None
        self._samples = 0

    def _cached(self, pid: int) -> psutil.Process:
        proc = self._procs.get(pid)
        if proc is None:
            proc = psutil.Process(pid)
            proc.cpu_percent(None)  # prime: the next call returns the share since now
            self._procs[pid] = proc
        return proc

    def _static_info(self, proc: psutil.Process) -> dict[str, object]:
        if self._static is None:
            env = read_environ(self.pid)
            try:
                cmdline = tuple(proc.cmdline())
                username: str | None = proc.username()
            except psutil.Error:
                cmdline, username = (), None
            try:
                started_at: float | None = proc.create_time()
            except psutil.Error:
                started_at = None
            self._static = {"env": env, "cmdline": cmdline, "username": username,
                            "python_version": python_version(proc), "started_at": started_at}
        return self._static

    def sample(self) -> ProcessSample:
        now = time.time()
        try:
            proc = self._cached(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                raise psutil.NoSuchProcess(self.pid)
            static = self._static_info(proc)
            with proc.oneshot():
                cpu = proc.cpu_percent(None)
                first = self._samples == 0
                self._samples += 1
                rss = proc.memory_info().rss / 2**20
                threads = proc.num_threads()
            try:
                affinity: tuple[int, ...] | None = tuple(proc.cpu_affinity() or ())
            except (psutil.Error, AttributeError):
                affinity = None
            workers = self._workers(proc)
        except psutil.NoSuchProcess:
            return ProcessSample(timestamp=now, pid=self.pid, alive=False)
        except psutil.AccessDenied:
            return ProcessSample(timestamp=now, pid=self.pid, alive=True)
        env = dict(static["env"])  # type: ignore[call-overload]
        return ProcessSample(
            timestamp=now, pid=self.pid, alive=True,
            cmdline=static["cmdline"],  # type: ignore[arg-type]
            username=static["username"],  # type: ignore[arg-type]
            python_version=static["python_version"],  # type: ignore[arg-type]
            started_at=static["started_at"],  # type: ignore[arg-type]
            cpu_pct=None if first else cpu, rss_mib=rss, num_threads=threads, cpu_affinity=affinity,
            cgroup_cpu_quota=cgroup_cpu_quota(self.pid), workers=workers, env=env,
            rank=_int_or_none(env.get("RANK")), local_rank=_int_or_none(env.get("LOCAL_RANK")),
            world_size=_int_or_none(env.get("WORLD_SIZE")), stopped=process_stopped(self.pid),
        )

    def _workers(self, proc: psutil.Process) -> tuple[WorkerSample, ...]:
        out = []
        try:
            children = proc.children(recursive=True)
        except psutil.Error:
            return ()
        alive = {c.pid for c in children}
        for pid in list(self._procs):
            if pid != self.pid and pid not in alive:
                del self._procs[pid]
        for child in children:
            try:
                known = child.pid in self._procs
                cached = self._cached(child.pid)
                role = _role(cached)
                cpu = cached.cpu_percent(None) if known else None
                rss = cached.memory_info().rss / 2**20
            except psutil.Error:
                continue
            out.append(WorkerSample(pid=child.pid, cpu_pct=cpu, rss_mib=rss, role=role))
        return tuple(out)


def _role(proc: psutil.Process) -> str:
    """rank for the job's ranks, compile for inductor workers, dataloader for Python children that are
    copies of their parent (forked, or multiprocessing's spawn children), program for a Python program
    the parent ran (``subprocess``: another command line, e.g. the training script under a one-process
    ``accelerate launch``).

    A rank is told from a DataLoader worker as :mod:`gpudoctor.live.ranks` tells it: a rank variable
    its parent does not have (torchrun, Lightning ``ddp``), or, for ranks whose launcher set no
    environment (``torch.multiprocessing.spawn``, a forking parent), a process group of its own.
    """
    try:
        cmd = " ".join(proc.cmdline())
    except psutil.Error:
        return "other"
    if "compile_worker" in cmd or "torch/_inductor" in cmd:
        return "compile"
    if "py-spy" in cmd or "multiprocessing.resource_tracker" in cmd or "multiprocessing.forkserver" in cmd:
        return "other"  # helpers, not workers
    try:
        parent_env = ranks.read_environ(proc.ppid()) or {} if proc.ppid() else {}
    except psutil.Error:
        parent_env = {}
    own_env = ranks.read_environ(proc.pid) or {}
    own_rank = ranks.rank_from_env(own_env)
    if "torchrun" not in cmd and own_rank is not None and own_rank[:2] != (ranks.rank_from_env(parent_env) or ())[:2]:
        return "rank"
    if own_rank is None and ranks.is_tree_rank(proc, parent_env):
        return "rank"
    if not ("python" in cmd.lower() or proc.name().startswith(("python", "pt_"))):
        return "other"
    return "program" if is_program_child(proc, cmd) else "dataloader"


def is_program_child(proc: psutil.Process, cmd: str | None = None) -> bool:
    """Whether a Python child runs a program of its own rather than a copy of its parent.

    A forked child keeps its parent's command line (DataLoader workers, a forking parent's ranks);
    a multiprocessing spawn or forkserver child runs ``multiprocessing``'s entry point. Anything else
    was started with a command of its own (``subprocess``, a launcher's ``python train.py``).
    """
    try:
        cmd = cmd if cmd is not None else " ".join(proc.cmdline())
        parent_cmd = " ".join(psutil.Process(proc.ppid()).cmdline())
    except (psutil.Error, OSError):
        return False
    copy = cmd == parent_cmd or "--multiprocessing-fork" in cmd or "from multiprocessing" in cmd
    return bool(cmd) and not copy


def launched_program(pid: int, levels: int = 3) -> tuple[int, str] | None:
    """The process that does the work when ``pid`` only launched it: (its PID, its command line).

    ``pid`` is such a launcher when it is no rank of a distributed job, its only Python child is a
    program of its own (:func:`is_program_child`: ``accelerate launch`` with one process runs ``python
    train.py`` so, as does any wrapper script), it has no DataLoader workers, and that child has used
    at least as much CPU as it has — a launcher waits, the trainer works (a training process with a
    helper child, a metrics service say, has used far more CPU than its helper). Followed down up to
    ``levels`` launchers; ``None`` when ``pid`` is not one.
    """
    found: tuple[int, str] | None = None
    current = pid
    for _ in range(levels):
        try:
            proc = psutil.Process(current)
            if ranks.rank_from_env(ranks.read_environ(current) or {}) is not None:
                break
            roles = [(c, _role(c)) for c in proc.children()]
            python_children = [(c, r) for c, r in roles if r in ("program", "dataloader", "rank")]
            if len(python_children) != 1 or python_children[0][1] != "program":
                break
            child = python_children[0][0]
            own, theirs = proc.cpu_times(), child.cpu_times()
            if theirs.user + theirs.system < own.user + own.system:
                break
            found = (child.pid, " ".join(child.cmdline()))
            current = child.pid
        except psutil.Error:
            break
    return found
