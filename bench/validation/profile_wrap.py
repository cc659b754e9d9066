"""Run a training script under torch.profiler for a few optimizer steps, write the trace, and stop.

Why this exists: the transformer validation needs a profile of each script's baseline without editing
the script. A global optimizer step hook (``register_optimizer_step_post_hook``, as the gpudoctor
agent does) advances the profiler once per optimizer step, so ``ProfilerStep#N`` spans are the
script's own steps; the profiler starts on the main thread before the script runs (DESIGN.md: a
profiler started from another thread misses the CPU ops). When the window ends the trace is written
and the process exits at once.

    python profile_wrap.py OUT.json.gz WAIT_STEPS ACTIVE_STEPS script.py [script args…]
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook


def main() -> None:
    out, wait, active = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    script = sys.argv[4]
    sys.argv = sys.argv[4:]
    sys.path.insert(0, str(Path(script).resolve().parent))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)

    def done(prof: torch.profiler.profile) -> None:
        prof.export_chrome_trace(out)
        print(f"profile_wrap: wrote {out}", flush=True)
        sys.stdout.flush()
        os._exit(0)

    prof = torch.profiler.profile(activities=activities, on_trace_ready=done,
                                  schedule=torch.profiler.schedule(wait=wait, warmup=1, active=active))

    def step(*_: object) -> None:  # no synchronize here: it would add a host sync to every profiled step
        prof.step()

    register_optimizer_step_post_hook(step)
    prof.start()
    runpy.run_path(script, run_name="__main__")
    prof.stop()


if __name__ == "__main__":
    main()
