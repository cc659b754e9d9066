"""A training loop that saves a checkpoint when interrupted, the way real jobs do (run as a subprocess).

``saving_job.py LOG CKPT``: trains a tiny CPU model (a torch.optim step, so the agent sees steps),
creates ``CKPT.ready`` after 5 steps, and on SIGINT/SIGTERM/SIGHUP (each noted in LOG, one line a
signal) raises KeyboardInterrupt like Python's own SIGINT handler. Its ``except KeyboardInterrupt``
writes CKPT slowly (10 lines over 0.5 s, then ``END``, then renamed into place): a second signal during
the save interrupts it, and CKPT is never written. After the save it keeps noting signals for 1 s.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from types import FrameType

import torch

LOG, CKPT = sys.argv[1], sys.argv[2]
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def note(signum: int, frame: FrameType | None) -> None:
    with open(LOG, "a") as fh:
        fh.write(signal.Signals(signum).name + "\n")


def interrupt(signum: int, frame: FrameType | None) -> None:
    note(signum, frame)
    raise KeyboardInterrupt


for sig in SIGNALS:
    signal.signal(sig, interrupt)

model = torch.nn.Linear(8, 8)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = 0
try:
    while True:
        model(torch.randn(16, 8)).sum().backward()
        opt.step()
        opt.zero_grad()
        steps += 1
        if steps == 5:
            open(CKPT + ".ready", "w").close()
        time.sleep(0.02)
except KeyboardInterrupt:
    with open(CKPT + ".tmp", "w") as fh:
        for i in range(10):
            fh.write(f"{i}\n")
            fh.flush()
            time.sleep(0.05)
        fh.write(f"END {steps}\n")
    os.replace(CKPT + ".tmp", CKPT)
for sig in SIGNALS:
    signal.signal(sig, note)
time.sleep(1.0)
print("saved", flush=True)
