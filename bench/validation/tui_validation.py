"""Validate the dashboard on a real GPU, in one go (≤ 4 minutes): real NVML/GPM readings on screen.

Run on the GPU machine (python3.12, torch+CUDA, nvidia-ml-py, psutil, textual==8.2.8, gpudoctor
installed; no tmux needed — the dashboard runs headless under Textual's Pilot at 160×48):

    python3.12 bench/validation/tui_validation.py

For the input-bound example on CUDA it starts the training job, attaches a real LiveSession
(NVML + process + py-spy + injected agent), opens the dashboard on it and checks what a user would
see: the GPU line with utilisation, SM and tensor-core activity (GPM), step timings, and GD102
with its fix. It then presses ``p`` (5-step profile; findings from the trace join the list), ``e``
(export), measures key latency (down/up → detail pane changed) and the dashboard's own CPU, presses
``q`` and checks the job still runs. Prints the final screen and a short table; the job is killed
at the end.
"""

from __future__ import annotations

import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "input_bound.py"


def screen_text(app) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def drive(pid: int, export_dir: Path) -> dict[str, object]:
    from gpudoctor.catalog import load_catalog
    from gpudoctor.live.session import LiveSession
    from gpudoctor.tui.app import GpudoctorApp
    from gpudoctor.tui.widgets.detail import FindingDetail
    from gpudoctor.tui.widgets.findings import FindingsList

    out: dict[str, object] = {}
    session = LiveSession(pid, load_catalog(), agent="inject", window_s=3.0).start()
    app = GpudoctorApp(session=session, refresh_s=1.0, export_dir=export_dir)
    t_start = time.monotonic()
    async with app.run_test(size=(160, 48)) as pilot:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
            text = screen_text(app)
            if "GD102" in text and "tensor" in text:
                break
        text = screen_text(app)
        out["gd102_on_screen_s"] = round(time.monotonic() - t_start, 1) if "GD102" in text else None
        out["gpu_line"] = next((line.strip("│ ") for line in text.splitlines() if "GPU0" in line), "")
        out["tensor_shown"] = "tensor" in str(out["gpu_line"])
        # key latency on a live screen
        latencies = []
        findings = app.query_one(FindingsList)
        for i in range(10):
            before = app.query_one(FindingDetail).finding
            t0 = time.perf_counter()
            await pilot.press("down" if i % 2 == 0 else "up")
            if app.query_one(FindingDetail).finding != before or len(findings.shown) < 2:
                latencies.append(1000 * (time.perf_counter() - t0))
        out["key_latency_ms_p50"] = round(statistics.median(latencies), 1) if latencies else None
        # profile: trace findings join the list
        await pilot.press("p")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            await pilot.pause(0.5)
            if app.latest is not None and (app.latest.agent.profile_status or "") in ("done", "failed"):
                break
        out["profile_status"] = app.latest.agent.profile_status if app.latest else None
        out["trace_findings"] = sorted({f.code for f in findings.shown if f.source.value == "trace"})
        await pilot.press("e")
        await pilot.pause(2)
        out["exported"] = [p.name for p in export_dir.iterdir()]
        cpu0, t0 = time.process_time(), time.monotonic()
        await pilot.pause(20)
        out["process_cpu_pct_20s"] = round(100 * (time.process_time() - cpu0) / (time.monotonic() - t0), 1)
        out["final_screen"] = screen_text(app)
        await pilot.press("q")
    session.close()
    return out


def main() -> int:
    device = sys.argv[1] if len(sys.argv) > 1 else "cuda"  # "cpu" to try the script without a GPU
    if not EXAMPLE.is_file():
        print(f"missing {EXAMPLE}")
        return 2
    log_path = Path(tempfile.mkdtemp(prefix="gd-tui-job-")) / "job.log"
    with log_path.open("wb") as log:
        job = subprocess.Popen([sys.executable, str(EXAMPLE), "--steps", "0", "--device", device],
                               stdout=log, stderr=subprocess.STDOUT, cwd=EXAMPLE.parent)
    try:
        time.sleep(8)
        if job.poll() is not None:
            print("the training job failed to start:", log_path.read_text()[-2000:])
            return 1
        with tempfile.TemporaryDirectory() as tmp:
            result = asyncio.run(asyncio.wait_for(drive(job.pid, Path(tmp)), timeout=200))
        result["job_alive_after_q"] = job.poll() is None
    finally:
        job.kill()
        job.wait()
        log_path.unlink(missing_ok=True)
    print(result.pop("final_screen"))
    print(f"{'check':<28}value")
    for key, value in result.items():
        print(f"{key:<28}{value}")
    ok = bool(result["tensor_shown"]) and result["gd102_on_screen_s"] is not None and result["job_alive_after_q"]
    print("RESULT:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
