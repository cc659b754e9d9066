"""Light (torch-free) Python targets for live tests where torch's start-up would only cost time.

- ``exit SECONDS``: a busy Python loop that exits after SECONDS.
- ``workers``: a main process with 2 forked worker processes that, like DataLoader workers, hand
  data to the main process through /dev/shm segments (multiprocessing.shared_memory).
Prints "ready" when running.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from multiprocessing import shared_memory


def _worker(queue: mp.Queue, parent: int) -> None:  # type: ignore[type-arg]
    segment = shared_memory.SharedMemory(create=True, size=4 * 2**20)
    queue.put(segment.name)
    while os.getppid() == parent:  # a test that SIGKILLs the main process must not leave us spinning
        segment.buf[:1024] = bytes(1024)
        sum(range(20000))
    segment.close()
    segment.unlink()


def main() -> None:
    mode = sys.argv[1]
    if mode == "exit":
        end = time.monotonic() + float(sys.argv[2])
        print("ready", flush=True)
        while time.monotonic() < end:
            sum(range(10000))
        return
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(queue, os.getpid()), daemon=True) for _ in range(2)]
    for w in workers:
        w.start()
    segments = [shared_memory.SharedMemory(name=queue.get(timeout=30)) for _ in workers]
    print("ready", flush=True)
    while True:
        for seg in segments:
            bytes(seg.buf[:1024])
        time.sleep(0.01)


if __name__ == "__main__":
    main()
