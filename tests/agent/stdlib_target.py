"""A target process with the agent and no torch: it marks a step every 10 ms (run as a subprocess).

For the wire tests (tests/agent/test_server_hostile.py, tests/fuzz/agent_wire.py): prints
``ready <socket path>`` once the agent listens, then steps until killed.
"""

from __future__ import annotations

import time

from gpudoctor.agent import runtime

path = runtime.install("import")
print(f"ready {path}", flush=True)
while True:
    runtime.mark_step()
    time.sleep(0.01)
