"""Find every local rank of a distributed training job from one PID.

Why this exists: ``gpudoctor attach <pid>`` may be given a launcher (``torchrun``,
``torch.multiprocessing.spawn``'s parent, ``srun``/``mpirun``) or any one of its ranks; either way
the session must watch all ranks on this machine, because a straggler is only visible by
comparison. Ranks are recognised from the environment each process was started with
(``/proc/<pid>/environ``: ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` set by torchrun and friends,
``SLURM_PROCID``, ``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``; Lightning's ``ddp`` strategy sets
``LOCAL_RANK``/``NODE_RANK``/``WORLD_SIZE`` but no ``RANK``) and from the process tree (psutil).

Launchers that set no environment a child was started with — ``torch.multiprocessing.spawn``
(pytorch/examples' ImageNet ``--multiprocessing-distributed``, Lightning's ``ddp_spawn``), a plain
parent that forks its ranks, and the parent that trains as rank 0 itself (Lightning's ``ddp``
re-launches the script for ranks 1…N-1) — are read from the process tree: a Python child of the
launcher is a rank when it runs a process group (torch.distributed's own threads: ``pt_gloo_*``,
``gloo_*``, ``pt_nccl_*``), or when it is a ``spawn_main`` child that trains with its
own DataLoader workers, or that was given ``MASTER_ADDR``/``MASTER_PORT`` its launcher was not
started with. Such ranks are numbered in start order, ``rank_source="spawn-order"`` or
``"tree-order"`` (the agent's ``hello`` reply, which asks torch itself, is the authority when it is
there).

DataLoader workers and compile workers inherit their rank's environment; they are children of a
rank with the same rank number and are not ranks themselves. A ``spawn``-context DataLoader worker
has the same ``spawn_main`` command line as an ``mp.spawn`` rank, but no process group threads and
no children: a single-process job with such workers is one rank, not several.

What it must not do: signal, ptrace or otherwise touch the processes it looks at; raise anything
but :class:`~gpudoctor.exitcodes.UserError` for a PID that does not exist. Check by hand:
``tr '\\0' '\\n' < /proc/<pid>/environ | grep -E 'RANK|WORLD_SIZE'`` and ``ps --forest -o pid,args``.
"""

from __future__ import annotations

import os
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
#: Thread names (``/proc/<pid>/task/*/comm``) of torch.distributed's gloo and NCCL process groups. Not
#: the c10d store's (``pt_tcpstore*``): torchrun's own process hosts the rendezvous store, and trains not.
_PG_THREADS = ("pt_gloo", "gloo_", "pt_nccl")
#: Children of a launcher that are never ranks.
_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver", "compile_worker", "py-spy")
_ANCESTOR_LEVELS = 4


@dataclass(frozen=True)
class RankProcess:
    """One rank of the job, as seen from outside.

    Attributes:
        pid: The rank's process id.
        rank: Global rank, or ``None`` when it could not be told.
        local_rank: Rank on this machine, or ``None``.
        world_size: Ranks in the whole job (all machines), or ``None``.
        rank_source: ``env`` (from its environment), ``spawn-order`` (``mp.spawn`` child, numbered
            by start order) or ``tree-order`` (a forked child, or the launcher that trains as a rank
            itself, found by its process group).
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
    """(rank, local_rank, world_size) from a launcher's variables, or ``None`` when not a rank.

    Lightning's ``ddp`` children carry ``LOCAL_RANK`` and ``NODE_RANK`` but no ``RANK``: their rank is
    ``NODE_RANK × LOCAL_WORLD_SIZE + LOCAL_RANK`` (the local rank on node 0 or when the local world size
    is not given; the agent's ``hello`` reply corrects it).
    """
    for rank_var, local_var, world_var in _RANK_VARS:
        rank = _int(env.get(rank_var))
        if rank is not None:
            return rank, _int(env.get(local_var)), _int(env.get(world_var))
    local = _int(env.get("LOCAL_RANK"))
    node = _int(env.get("NODE_RANK", env.get("GROUP_RANK")))
    if local is not None and (node is not None or "WORLD_SIZE" in env):
        per_node = _int(env.get("LOCAL_WORLD_SIZE"))
        rank = (node or 0) * per_node + local if per_node else local
        return rank, local, _int(env.get("WORLD_SIZE"))
    return None


def has_process_group(pid: int) -> bool:
    """True when ``pid`` runs a torch.distributed process group: a gloo or NCCL thread of its own.

    A fork copies only the forking thread, so a DataLoader worker forked by a rank has none of these.
    Check by hand: ``cat /proc/<pid>/task/*/comm``.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as fh:
                if fh.read().strip().startswith(_PG_THREADS):
                    return True
        except OSError:
            continue
    return False


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


def _cmd(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except (psutil.Error, OSError):
        return ""


def _has_python_children(proc: psutil.Process) -> bool:
    try:
        return any(_is_python(c) and not any(h in _cmd(c) for h in _HELPERS) for c in proc.children())
    except (psutil.Error, OSError):
        return False


def _given_master(child: psutil.Process, parent_env: dict[str, str]) -> bool:
    """The child was started with ``MASTER_ADDR``/``MASTER_PORT`` its parent was not started with."""
    env = read_environ(child.pid) or {}
    return any(k in env and k not in parent_env for k in ("MASTER_ADDR", "MASTER_PORT"))


def is_tree_rank(child: psutil.Process, parent_env: dict[str, str] | None = None,
                 parent_trains: bool | None = None) -> bool:
    """Whether a Python child of a launcher is a rank although its environment names none.

    It is when it runs a process group (:func:`has_process_group`). Under a parent that runs none (an
    ``mp.spawn`` launcher), a ``spawn_main`` child also is when it has DataLoader workers of its own or
    was given the rendezvous address — not yet training, or between its process group's threads.
    The ``spawn``-context DataLoader workers of a rank (Lightning ``ddp_spawn``'s) inherit the address
    the rank set for itself and look the same: under a parent that trains, only a process group counts.
    Helpers (resource tracker, forkserver, compile workers) never are ranks.
    """
    cmd = _cmd(child)
    if not cmd or any(h in cmd for h in _HELPERS) or not _is_python(child):
        return False
    if has_process_group(child.pid):
        return True
    if not _is_spawn_child(child):
        return False
    if parent_trains is None:
        parent_trains = has_process_group(child.ppid())
    if parent_trains:
        return False
    return _has_python_children(child) or _given_master(child, parent_env if parent_env is not None else {})


def _tree_ranks(parent: psutil.Process) -> list[RankProcess]:
    """Ranks among ``parent``'s children by the process tree, numbered by start order."""
    if not _is_python(parent):
        return []
    parent_env = read_environ(parent.pid) or {}
    trains_too = has_process_group(parent.pid)  # a parent that is rank 0 itself (a plain forking parent)
    try:
        children = [c for c in parent.children() if is_tree_rank(c, parent_env, trains_too)]
        children.sort(key=lambda c: (c.create_time(), c.pid))
    except (psutil.Error, OSError):
        return []
    if len(children) + trains_too < 2:
        return []
    n = len(children) + trains_too
    source = "spawn-order" if all(_is_spawn_child(c) for c in children) and not trains_too else "tree-order"
    ranks = [RankProcess(parent.pid, 0, 0, n, "tree-order")] if trains_too else []
    return ranks + [RankProcess(c.pid, i + trains_too, i + trains_too, n, source) for i, c in enumerate(children)]


def _with_training_launcher(ranks: list[RankProcess], launcher: int | None) -> list[RankProcess]:
    """Add the launcher as a rank when it trains too (Lightning ``ddp``: the script is rank 0 and
    re-launches itself for the others), numbered with the local rank its children leave free."""
    if launcher is None or not ranks or launcher in {r.pid for r in ranks} or not has_process_group(launcher):
        return ranks
    taken = {r.local_rank for r in ranks} | {r.rank for r in ranks}
    free = next(i for i in range(len(ranks) + 1) if i not in taken)
    world = next((r.world_size for r in ranks if r.world_size is not None), None)
    return sorted([RankProcess(launcher, free, free, world, "tree-order"), *ranks],
                  key=lambda r: (r.rank if r.rank is not None else -1, r.pid))


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
        ranks = _with_training_launcher(ranks, launcher)
    else:
        ranks = _env_ranks(_descendants(target), None)
        if len(ranks) == 1 and (ranks[0].world_size or 1) == 1:
            ranks = []  # a child that inherited RANK=0 the target set for itself: not a distributed job
        if ranks:
            launcher = pid
            if len({_job_key(read_environ(r.pid) or {}) for r in ranks}) > 1:
                notes.append(f"PID {pid} launches more than one job; watching all of their ranks.")
            ranks = _with_training_launcher(ranks, launcher)
        else:
            ranks = _tree_ranks(target)
            launcher = pid if ranks else None
            parents = _safe_parents(target)
            if not ranks and parents and is_tree_rank(target, read_environ(parents[0].pid) or {}):
                ranks = _tree_ranks(parents[0])          # one rank of an mp.spawn / forking launcher
                launcher = parents[0].pid if ranks else None
            if not ranks and parents and has_process_group(parents[0].pid):
                # a DataLoader worker of a rank whose environment names no rank (Lightning's rank 0)
                found = discover_ranks(parents[0].pid)
                return RankGroup(pid, found.launcher_pid, found.ranks, found.world_size, found.notes)
            if not ranks and sum(1 for c in _children(target) if _is_spawn_child(c)) >= 2:
                notes.append(f"PID {pid} has spawn children but none runs a process group yet; if they are "
                             "ranks, attach again once the job trains.")
    if not ranks:
        return RankGroup(pid, None, (RankProcess(pid, None, None, None, "none"),), None, tuple(notes))
    world = next((r.world_size for r in ranks if r.world_size is not None), None)
    if world is not None and world > len(ranks):
        notes.append(f"{len(ranks)} of {world} ranks run on this machine; the others are not watched.")
    if any(r.rank_source == "spawn-order" for r in ranks):
        notes.append("ranks of torch.multiprocessing.spawn are numbered by start order until the agent confirms them.")
    elif any(r.rank_source == "tree-order" for r in ranks):
        notes.append("ranks found by their process group are numbered by start order until the agent confirms them.")
    return RankGroup(pid, launcher, tuple(ranks), world, tuple(notes))


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return list(proc.children())
    except (psutil.Error, OSError):
        return []


def _safe_parents(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in proc.parents() if p.pid > 1]
    except (psutil.Error, OSError):
        return []
