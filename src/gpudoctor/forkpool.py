"""One function over many items on forked worker processes, with nothing between the fork and the work.

Why this exists: a directory of rank traces is read one rank per worker (:mod:`gpudoctor.trace.analysis`),
and at 16 ranks of ~0.15 s each everything that is not reading a rank is what bounds the speedup.
``concurrent.futures.ProcessPoolExecutor`` costs 35–45 ms of that on the development machine for
2–16 workers (importing multiprocessing and concurrent.futures, a feeder and a manager thread, a
pickled call per task, a sentinel per worker at shutdown); this pool costs ~10 ms for the same
16 workers: ``os.fork`` per worker, the task indices in one pipe that every worker reads 4 bytes at
a time (a pipe read is atomic, so each index goes to exactly one worker, handed out as workers free
up: a large item never holds back a queue of small ones), and one result pipe per worker carrying
length-prefixed pickles. The items themselves never cross a pipe: a forked worker already has them.

The pool starts working when it is made, so the caller can do its own work (import and load the
rule catalog, say) while the workers run, and collect with :meth:`ForkPool.results`.

What it must not do: fork a process that runs other threads (a forked child gets only the calling
thread, and a lock another thread held stays locked forever: the caller checks, see
:func:`can_fork`), print anything, or let a worker run the parent's exit handlers or flush its
buffers (workers leave through ``os._exit``).
"""

from __future__ import annotations

import gc
import os
import pickle
import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_TASK = 4  # bytes per task index in the task pipe
_PIPE_BUF = 4096  # POSIX: a pipe write of at most this many bytes is atomic
_LENGTH = 8  # bytes of the length prefix of each pickled result
_DONE = -1  # the index of a worker's last message: no task left for it


def usable_cores() -> int:
    """The cores this process may use: its CPU affinity, capped by a cgroup CPU quota (a container
    or Kubernetes pod limited to 8 CPUs on a 96-core node sees 96 cores in its affinity; 96 workers
    there would each get a twelfth of a core and hold a rank's memory)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    quota = _cgroup_cpu_quota()
    return max(1, min(cores, quota) if quota else cores)


def _cgroup_cpu_quota(root: Path = Path("/sys/fs/cgroup"), membership: Path = Path("/proc/self/cgroup")) -> int | None:
    """CPUs allowed by this process's cgroup quota (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``), rounded
    up; None when there is none or it cannot be read."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return None
    limits = []
    names: tuple[str, ...]
    for line in lines:
        if line.count(":") < 2:
            continue
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            base, names = root, ("cpu.max",)
        elif "cpu" in controllers.split(","):
            base, names = root / controllers, ("cpu.cfs_quota_us", "cpu.cfs_period_us")
            if not base.is_dir():
                base = root / "cpu"
        else:
            continue
        directory = base / path.lstrip("/")
        while True:  # a limit on any ancestor applies too
            limit = _quota_in(directory, names)
            if limit:
                limits.append(limit)
            if directory == base or base not in directory.parents:
                break
            directory = directory.parent
    return min(limits) if limits else None


def _quota_in(directory: Path, names: tuple[str, ...]) -> int | None:
    try:
        if len(names) == 1:
            quota, period = (directory / names[0]).read_text().split()[:2]
        else:
            quota, period = ((directory / n).read_text().strip() for n in names)
        if quota in ("max", "-1") or int(period) <= 0:
            return None
        return max(1, -(-int(quota) // int(period)))
    except (OSError, ValueError):
        return None


def _fd_room() -> int:
    """Workers that fit in this process's open-file limit: each holds one pipe open here (two fds
    while it is being forked), and the process needs some for itself."""
    try:
        limit = os.sysconf("SC_OPEN_MAX")
    except (ValueError, OSError):
        return 256
    return max(1, (limit - 64) // 2) if limit > 0 else 256


class WorkerDied(Exception):
    """A worker ended (killed, out of memory) before sending back every result it took."""


def can_fork() -> bool:
    """Whether this process may fork workers: the platform has fork and no other thread runs."""
    return hasattr(os, "fork") and threading.active_count() == 1


class ForkPool:
    """``fn(*items[i])`` for every ``i``, on ``workers`` forked processes, started at construction.

    An exception raised by ``fn`` comes back and is raised again by :meth:`results` (the first one,
    in item order); a worker that dies makes :meth:`results` raise :class:`WorkerDied`.
    :meth:`close` (or leaving a ``with`` block) ends the workers that still run.
    """

    def __init__(self, fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], workers: int,
                 order: Sequence[int] | None = None) -> None:
        """``order``: the item indices in the order the workers take them (default: as given); the
        largest first keeps one large item from starting last."""
        self._count = len(items)
        self._workers: dict[int, int] = {}  # result pipe's read end -> worker pid
        self._reaped: dict[int, int] = {}  # pid -> exit status
        self._done: set[int] = set()  # result pipes whose worker sent its last message
        self._task_w: int | None = None
        order = range(self._count) if order is None else order
        if sorted(order) != list(range(self._count)):
            raise ValueError("order must hold every item index once")
        records = b"".join(i.to_bytes(_TASK, "little") for i in order)
        task_r, task_w = os.pipe()
        os.set_blocking(task_w, False)
        self._task_w = task_w
        self._pending = self._feed(memoryview(records))  # whatever did not fit goes from results()
        # gc.freeze: the workers' collections then skip every object inherited from this process
        # (no copy-on-write of its pages); the parent gets them back right after the forks.
        gc.freeze()
        try:
            for _ in range(max(1, min(workers, self._count, _fd_room()))):
                read_end, write_end = os.pipe()
                pid = os.fork()
                if pid == 0:  # the worker: never returns
                    _work(fn, items, task_r, write_end, [task_w, read_end, *self._workers])
                os.close(write_end)
                self._workers[read_end] = pid
        except BaseException:
            self.close()
            raise
        finally:
            gc.unfreeze()
            os.close(task_r)
        if not self._pending:
            self._close_tasks()

    def _feed(self, pending: memoryview) -> memoryview:
        """Write whole task records while the pipe takes them (at most ``_PIPE_BUF`` bytes a write, so
        that no record is ever split); return what is left."""
        assert self._task_w is not None
        while pending:
            batch = pending[:_PIPE_BUF]
            try:
                written = os.write(self._task_w, batch)
            except BlockingIOError:
                break
            pending = pending[written:]
        return pending

    def _close_tasks(self) -> None:
        if self._task_w is not None:
            os.close(self._task_w)
            self._task_w = None

    def results(self) -> list[Any]:
        """Every result, in item order, once every worker has said it is done.

        The workers are not waited for here: a worker's exit (the kernel unmapping a rank's memory,
        5–10 ms) overlaps whatever the caller does next; :meth:`close` reaps them.

        Raises:
            WorkerDied: a worker ended before returning all it took.
            Exception: the first exception ``fn`` raised, in item order.
        """
        import selectors  # here: an analyze run with one process never needs it

        outcomes: dict[int, tuple[bool, Any]] = {}
        buffers = {fd: bytearray() for fd in self._workers}
        with selectors.DefaultSelector() as selector:
            for fd in self._workers:
                selector.register(fd, selectors.EVENT_READ)
            if self._task_w is not None:
                selector.register(self._task_w, selectors.EVENT_WRITE)
            while len(selector.get_map()) > 0:
                for key, _ in selector.select():
                    if key.fd == self._task_w:
                        self._pending = self._feed(self._pending)
                        if not self._pending:
                            selector.unregister(key.fd)
                            self._close_tasks()
                        continue
                    chunk = os.read(key.fd, 1 << 20)
                    if chunk and not _take_messages(buffers[key.fd], chunk, outcomes):
                        continue
                    selector.unregister(key.fd)
                    if chunk:
                        self._done.add(key.fd)
                        continue
                    # the pipe closed before the worker said it was done: it died
                    status = self._reap(key.fd)
                    self.close()
                    raise WorkerDied(f"worker {self._describe(status)}")
        if len(outcomes) < self._count:
            self.close()
            raise WorkerDied("workers ended with items left undone")
        for i in range(self._count):
            ok, value = outcomes[i]
            if not ok:
                self.close()
                raise value
        return [outcomes[i][1] for i in range(self._count)]

    def _reap(self, fd: int) -> int:
        pid = self._workers.pop(fd)
        self._done.discard(fd)
        os.close(fd)
        _, status = os.waitpid(pid, 0)
        self._reaped[pid] = status
        return status

    @staticmethod
    def _describe(status: int) -> str:
        if os.WIFSIGNALED(status):
            return f"killed by signal {os.WTERMSIG(status)}"
        return f"exited with status {os.waitstatus_to_exitcode(status)}"

    def close(self) -> None:
        """End the workers that still work, reap all of them, close the pipes (idempotent)."""
        self._close_tasks()
        for fd, pid in list(self._workers.items()):
            if fd not in self._done:
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            self._reap(fd)

    def __enter__(self) -> ForkPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _take_messages(buffer: bytearray, chunk: bytes, outcomes: dict[int, tuple[bool, Any]]) -> bool:
    """Append ``chunk`` to a worker's buffer and unpickle every complete message in it; True once the
    worker's last message (its "done") is in."""
    buffer += chunk
    start = 0
    done = False
    while len(buffer) - start >= _LENGTH:
        size = int.from_bytes(buffer[start:start + _LENGTH], "little")
        end = start + _LENGTH + size
        if len(buffer) < end:
            break
        try:
            index, ok, value = pickle.loads(memoryview(buffer)[start + _LENGTH:end])
        except Exception as exc:  # an exception type that cannot be rebuilt here
            raise RuntimeError(f"a worker's result could not be read back: {exc}") from None
        if index == _DONE:
            done = True
        else:
            outcomes[index] = (ok, value)
        start = end
    del buffer[:start]
    return done


def _work(fn: Callable[..., Any], items: Sequence[tuple[Any, ...]], task_r: int, out: int,
          inherited: list[int | None]) -> None:
    """A worker's whole life: take task indices until the pipe is empty, send each result, leave."""
    code = 0
    try:
        for fd in inherited:
            if fd is not None:
                os.close(fd)
        while len(record := os.read(task_r, _TASK)) == _TASK:
            index = int.from_bytes(record, "little")
            try:
                message = (index, True, fn(*items[index]))
            except Exception as exc:
                message = (index, False, exc)
            try:
                data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # an unpicklable result or exception: say what it was
                data = pickle.dumps((index, False, RuntimeError(f"{type(exc).__name__}: {exc}")))
            _send(out, data)
        _send(out, pickle.dumps((_DONE, True, None)))
    except BaseException:  # Ctrl-C (the parent gets it too) or the parent gone: leave without a word
        code = 1
    finally:
        os._exit(code)


def _send(out: int, data: bytes) -> None:
    view = memoryview(len(data).to_bytes(_LENGTH, "little") + data)
    while view:
        view = view[os.write(out, view):]


__all__ = ["ForkPool", "WorkerDied", "can_fork", "usable_cores"]
