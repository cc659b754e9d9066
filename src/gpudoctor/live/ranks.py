"""Find every local rank of a distributed training job from one PID.

Why this exists: ``gpudoctor attach <pid>`` may be given a launcher (``torchrun``,
``torch.multiprocessing.spawn``'s parent, ``srun``/``mpirun``) or any one of its ranks; either way
the session must watch all ranks on this machine, because a straggler is only visible by
comparison. Ranks are recognised from the environment each process was started with
(``/proc/<pid>/environ``: ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set by torchrun and friends,
``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``) and from the process tree (psutil).
``torch.multiprocessing.spawn`` sets no environment: its children are recognised by their
``spawn_main`` command line and numbered in start order, marked ``rank_source="spawn-order"``
(the agent's ``hello`` reply, which asks torch itself, is the authority when it is there).

DataLoader workers and compile workers inherit their rank's environment; they are children of a
rank with the same rank number and are not ranks themselves.

What it must not do: signal, ptrace or otherwise touch the processes it looks at; raise anything
but :class:`~gpudoctor.exitcodes.UserError` for a PID that does not exist. Check by hand:
``tr '\\0' '\\n' < /proc/<pid>/environ | grep -E 'RANK|WORLD_SIZE'`` and ``ps --forest -o pid,args``.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from gpudoctor.exitcodes import ExitCode, UserError

#: (rank, local rank, world size) variables per launcher family, in order of preference.
_RANK_VARS: tuple[tuple[str, str, str], ...] = (
    ("RANK", "LOCAL_RANK", "WORLD_SIZE"),                                   # torchrun, accelerate, deepspeed
    ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"),                      # srun
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"),  # Open MPI
    ("PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"),                            # MPICH / Intel MPI
)
#: Variables that tell one job's ranks from another's on the same machine.
_JOB_VARS = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT", "SLURM_JOB_ID", "SLURM_STEP_ID",
             "OMPI_COMM_WORLD_JOBID")
_SPAWN_MARKERS = ("spawn_main", "--multiprocessing-fork")
_ANCESTOR_LEVELS = 4


@dataclass(frozen=True)
class RankProcess:
    """One rank of the job, as seen from outside.

    Attributes:
        pid: The rank's process id.
        rank: Global rank, or ``None`` when it could not be told.
        local_rank: Rank on this machine, or ``None``.
        world_size: Ranks in the whole job (all machines), or ``None``.
        rank_source: ``env`` (from its environment) or ``spawn-order`` (``mp.spawn`` child, numbered
            by start order).
    """

    pid: int
    rank: int | None
    local_rank: int | None
    world_size: int | None
    rank_source: str


@dataclass(frozen=True)
class RankGroup:
    """The local ranks of one job, found from ``target_pid``.

    Attributes:
        target_pid: The PID the user gave.
        launcher_pid: The process that started the ranks (torchrun, the spawn parent…), if known.
        ranks: Local ranks, ordered by rank (then PID).
        world_size: Ranks in the whole job, when a launcher said so.
        notes: One-line remarks for the user (e.g. "2 of 16 ranks run on this machine").
    """

    target_pid: int
    launcher_pid: int | None
    ranks: tuple[RankProcess, ...]
    world_size: int | None
    notes: tuple[str, ...] = ()

    @property
    def pids(self) -> tuple[int, ...]:
        return tuple(r.pid for r in self.ranks)

    def numbered(self) -> tuple[tuple[int, int], ...]:
        """(rank, pid) of each local rank; a rank whose number is unknown gets its position."""
        return tuple((r.rank if r.rank is not None else i, r.pid) for i, r in enumerate(self.ranks))

    @property
    def is_distributed(self) -> bool:
        return len(self.ranks) > 1 or (self.world_size or 1) > 1


def read_environ(pid: int) -> dict[str, str] | None:
    """The environment ``pid`` was started with, or ``None`` when it cannot be read (permissions)."""
    try:
        raw = open(f"/proc/{pid}/environ", "rb").read()  # noqa: SIM115 - one read, closed by GC at once
    except (FileNotFoundError, ProcessLookupError):
        return None
    except PermissionError:
        return None
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return out


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def rank_from_env(env: dict[str, str]) -> tuple[int, int | None, int | None] | None:
    """(rank, local_rank, world_size) from a launcher's variables, or ``None`` when not a rank."""
    for rank_var, local_var, world_var in _RANK_VARS:
        rank = _int(env.get(rank_var))
        if rank is not None:
            return rank, _int(env.get(local_var)), _int(env.get(world_var))
    return None


def _job_key(env: dict[str, str]) -> tuple[str, ...]:
    return tuple(env.get(k, "") for k in _JOB_VARS)


def _is_spawn_child(proc: psutil.Process) -> bool:
    try:
        cmd = " ".join(proc.cmdline())
    except (psutil.Error, OSError):
        return False
    return any(m in cmd for m in _SPAWN_MARKERS)


def _is_python(proc: psutil.Process) -> bool:
    try:
        name = proc.name().lower()
        exe_args = " ".join(proc.cmdline()[:1]).lower()
    except (psutil.Error, OSError):
        return False
    return "python" in name or "python" in exe_args


def _env_ranks(candidates: list[psutil.Process], key: tuple[str, ...] | None) -> list[RankProcess]:
    """Ranks among ``candidates`` by environment: the topmost Python process per rank number."""
    by_rank: dict[int, list[tuple[psutil.Process, tuple[int, int | None, int | None]]]] = {}
    for proc in candidates:
        env = read_environ(proc.pid)
        if env is None:
            continue
        found = rank_from_env(env)
        if found is None or (key is not None and _job_key(env) != key):
            continue
        by_rank.setdefault(found[0], []).append((proc, found))
    out = []
    for rank, members in sorted(by_rank.items()):
        pids = {p.pid for p, _ in members}
        # A member whose parent is in the same rank group is a worker (DataLoader, compile) or the
        # Python child of a shell wrapper; prefer the topmost Python process.
        def depth(p: psutil.Process, pids: set[int] = pids) -> int:
            d = 0
            try:
                for anc in p.parents():
                    if anc.pid in pids:
                        d += 1
            except (psutil.Error, OSError):
                pass
            return d
        members.sort(key=lambda m: (not _is_python(m[0]), depth(m[0]), m[0].pid))
        proc, (_, local_rank, world) = members[0]
        out.append(RankProcess(proc.pid, rank, local_rank, world, "env"))
    return out


def _spawn_ranks(parent: psutil.Process) -> list[RankProcess]:
    try:
        children = [c for c in parent.children() if _is_spawn_child(c)]
    except (psutil.Error, OSError):
        return []
    if len(children) < 2 or not _is_python(parent):
        return []
    children.sort(key=lambda c: (c.create_time(), c.pid))
    n = len(children)
    return [RankProcess(c.pid, i, i, n, "spawn-order") for i, c in enumerate(children)]


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except (psutil.Error, OSError):
        return [proc]


def discover_ranks(pid: int) -> RankGroup:
    """All local ranks of the job ``pid`` belongs to (or launches).

    A process that is not part of a distributed job comes back as a group of one rank with
    ``rank=None``. Never raises for processes that vanish while being looked at.

    Raises:
        UserError: ``pid`` does not exist (``ExitCode.NO_SUCH_PROCESS``).
    """
    try:
        target = psutil.Process(pid)
        target.status()
    except psutil.NoSuchProcess:
        raise UserError(f"no process with PID {pid}: check the PID with `ps` and try again.",
                        ExitCode.NO_SUCH_PROCESS) from None
    except psutil.AccessDenied:
        pass
    env = read_environ(pid)
    notes: list[str] = []
    if env is None:
        notes.append(f"cannot read the environment of PID {pid} (run as its user or root to see its rank).")
    own = rank_from_env(env) if env else None
    ranks: list[RankProcess] = []
    launcher: int | None = None
    if own is not None:
        key = _job_key(env or {})
        # Ranks are the launcher's descendants: look up the tree until a level holds siblings.
        ancestors = _safe_parents(target)[:_ANCESTOR_LEVELS]
        for anc in ancestors:
            anc_env = read_environ(anc.pid) or {}
            if rank_from_env(anc_env) is not None and _job_key(anc_env) == key:
                continue  # a shell wrapper or the rank itself seen from a worker
            ranks = _env_ranks(_descendants(anc), key)
            launcher = anc.pid
            break
        if not ranks:
            ranks = _env_ranks(_descendants(target), key)
    else:
        ranks = _env_ranks(_descendants(target), None)
        if ranks:
            launcher = pid
            if len({_job_key(read_environ(r.pid) or {}) for r in ranks}) > 1:
                notes.append(f"PID {pid} launches more than one job; watching all of their ranks.")
        else:
            ranks = _spawn_ranks(target)
            launcher = pid if ranks else None
            if not ranks and _is_spawn_child(target):
                parents = _safe_parents(target)
                if parents:
                    ranks = _spawn_ranks(parents[0])
                    launcher = parents[0].pid if ranks else None
    if not ranks:
        return RankGroup(pid, None, (RankProcess(pid, None, None, None, "none"),), None, tuple(notes))
    world = next((r.world_size for r in ranks if r.world_size is not None), None)
    if world is not None and world > len(ranks):
        notes.append(f"{len(ranks)} of {world} ranks run on this machine; the others are not watched.")
    if any(r.rank_source == "spawn-order" for r in ranks):
        notes.append("ranks of torch.multiprocessing.spawn are numbered by start order until the agent confirms them.")
    return RankGroup(pid, launcher, tuple(ranks), world, tuple(notes))


def _safe_parents(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in proc.parents() if p.pid > 1]
    except (psutil.Error, OSError):
        return []
