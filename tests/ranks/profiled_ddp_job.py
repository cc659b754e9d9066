"""ddp_job.py with a longer torch.profiler window: ``--profile`` records ``PROFILE_ACTIVE_STEPS`` steps.

Why this exists: ddp_job.py profiles 4 steps (wait=2, warmup=1, active=4), fewer than GD601's
post-hoc ``min_steps`` (5), so its traces can only give an ``info`` "too little evidence" verdict.
This wrapper runs the very same job but widens the schedule's ``active`` count, so the true
positives can be tested on a profile long enough to judge. It patches ``torch.profiler.schedule``
at import time, which also holds in the ranks ``torch.multiprocessing.spawn`` starts (they re-run
this main module as ``__mp_main__``).

What it must not do: import gpudoctor or change anything else about the job.

Usage::

    PROFILE_ACTIVE_STEPS=8 python profiled_ddp_job.py --mode compute --steps 14 --profile --out DIR
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import torch.profiler

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ddp_job  # after the path: this file runs as a script (and as __mp_main__ in the ranks)

ACTIVE_STEPS = int(os.environ.get("PROFILE_ACTIVE_STEPS", "8"))
_schedule = torch.profiler.schedule


def _longer_schedule(**kwargs: Any) -> Any:
    kwargs["active"] = ACTIVE_STEPS
    return _schedule(**kwargs)


torch.profiler.schedule = _longer_schedule  # type: ignore[assignment]

if __name__ == "__main__":
    ddp_job.main()
