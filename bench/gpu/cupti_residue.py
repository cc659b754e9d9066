"""Does a gpudoctor profile window leave the training job slower after it ends? (one GPU, ~90 s)

Run on the GPU machine from the repository root (gpudoctor installed):

    python3 bench/gpu/cupti_residue.py

Why: Kineto keeps CUPTI subscribed after torch.profiler stops unless ``TEARDOWN_CUPTI=1``
(pytorch#144455); every later kernel launch then pays for it. The agent asks for teardown before
its window (``agent/profiling.py ask_cupti_teardown``); ``GPUDOCTOR_CUPTI_TEARDOWN=0`` gives the old
behaviour. For each variant a launch-heavy CUDA training loop runs with the agent inside (as
``gpudoctor run`` starts it); its step rate is read from the agent over 4 s before and 4 s after a
5-step profile window (1 s after the window is left out). Variants: no profile (drift control),
profile without teardown, profile with the agent's teardown. Prints one table.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = r'''
import torch
torch.backends.cuda.matmul.allow_tf32 = True
layers = [torch.nn.Linear(512, 512) for _ in range(24)]
model = torch.nn.Sequential(*[m for l in layers for m in (l, torch.nn.GELU())]).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
x = torch.randn(64, 512, device="cuda")
print("ready", flush=True)
step = 0
while True:
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    step += 1
    if step % 50 == 0:
        torch.cuda.synchronize()
'''


def rate(client, window_s: float) -> float:
    time.sleep(window_s)
    return float(client.stats(window_s).steps_per_s or 0.0)


def variant(name: str, profile: bool, teardown: bool) -> dict:
    from gpudoctor.agent import client as agent_client
    from gpudoctor.commands.run import agent_env

    env = agent_env(dict(os.environ))
    env.pop("TEARDOWN_CUPTI", None)
    if not teardown:
        env["GPUDOCTOR_CUPTI_TEARDOWN"] = "0"
    script = Path(tempfile.mkdtemp()) / "loop.py"
    script.write_text(JOB)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout is not None and "ready" in proc.stdout.readline()
        client = agent_client.wait_for_agent(proc.pid, 30.0)
        if client is None:
            return {"variant": name, "error": "no agent"}
        time.sleep(3.0)                       # warm-up: allocator, cuBLAS handles, clocks
        before = rate(client, 4.0)
        if profile:
            client.profile(steps=5)
            status = client.wait_profile(30.0)
            if status.status != "done":
                return {"variant": name, "error": f"profile {status.status}: {status.detail}"}
        else:
            time.sleep(1.0)
        time.sleep(1.0)
        after = rate(client, 4.0)
        teardown_env = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        asked = any(e == b"TEARDOWN_CUPTI=1" for e in teardown_env)  # initial env only; informative
        return {"variant": name, "before": before, "after": after, "ratio": after / before if before else None,
                "teardown_in_start_env": asked}
    finally:
        proc.kill()
        proc.wait(timeout=10)


def main() -> int:
    import torch

    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 6
    rows = [variant("no profile window (drift)", False, True),
            variant("profile, CUPTI left up (old agent)", True, False),
            variant("profile, agent asks TEARDOWN_CUPTI=1", True, True)]
    print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
    print(f"{'variant':40} {'steps/s before':>15} {'after':>10} {'after/before':>13}")
    for r in rows:
        if "error" in r:
            print(f"{r['variant']:40} {r['error']}")
            continue
        print(f"{r['variant']:40} {r['before']:15.1f} {r['after']:10.1f} {r['ratio']:13.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
