"""Record what ``gpudoctor attach --headless --prometheus`` exports on real 2-rank gloo jobs, for the
cross-node rules test (``test_promtool_rules.py``).

Why this exists: the Prometheus recording/alerting rules of ``docs/prometheus/gpudoctor-rules.yml``
are tested with ``promtool test rules`` on series a real exporter produced, not on numbers typed in.
Two runs: ``straggler`` (``mp.spawn``, ``init_method=tcp://``, rank 1 with extra compute, each rank's
agent injected by ``attach``) and ``hang`` (torchrun, ``gpudoctor run``'s agents; healthy for a while,
then rank 1 blocks before the all-reduce and rank 0 waits in it, both at the same step). Every
``--every-s`` seconds the exporter is scraped and the per-rank samples are kept; the result is written
to ``tests/ranks/data/prometheus_series.json``.

Usage (about 4 minutes; re-run when the exporter's metric names change)::

    .venv/bin/python tests/ranks/record_prometheus_series.py
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
KEEP = ("gpudoctor_outside_collective_seconds", "gpudoctor_collective_wait_ratio", "gpudoctor_data_wait_ratio",
        "gpudoctor_step_time_seconds", "gpudoctor_steps_total", "gpudoctor_straggler_score")


def _scrape(url: str) -> list[tuple[str, dict[str, str], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return [(s.name, dict(s.labels), float(s.value)) for fam in text_string_to_metric_families(text)
            for s in fam.samples if s.name in KEEP]


def _wait_rows(out: Path, timeout_s: float = 180.0) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if all((out / f"rank{r}.jsonl").exists() and (out / f"rank{r}.jsonl").stat().st_size for r in (0, 1)):
            return
        time.sleep(0.5)
    raise SystemExit(f"the job in {out} did not start training")


def record(job: list[str], out: Path, seconds: float, every_s: float, env: dict[str, str] | None = None,
           hang_at_s: float | None = None) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(job, start_new_session=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    attach = None
    try:
        _wait_rows(out)
        attach = subprocess.Popen([str(BIN / "gpudoctor"), "attach", str(proc.pid), "--headless", "--prometheus", "0",
                                   "--window", "2", "--no-stacks", "--format", "json"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert attach.stderr is not None
        line = ""
        while "Prometheus metrics at " not in line:
            line = attach.stderr.readline()
            if not line:
                raise SystemExit("gpudoctor attach ended without serving metrics")
        url = line.split(" at ", 1)[1].strip()
        time.sleep(12.0)  # agents injected, first windows judged
        scrapes, start = [], time.time()
        while time.time() - start < seconds:
            t = time.time() - start
            if hang_at_s is not None and t >= hang_at_s and not (out / "hang").exists():
                (out / "hang").write_text("")
            scrapes.append({"t": round(t, 2), "samples": _scrape(url)})
            time.sleep(max(0.0, every_s - (time.time() - start - t)))
        return scrapes
    finally:
        if attach is not None:
            attach.send_signal(signal.SIGINT)
            try:
                attach.wait(timeout=30)
            except subprocess.TimeoutExpired:
                attach.kill()
        import psutil  # torchrun starts its ranks in sessions of their own: its process group misses them

        victims = psutil.Process(proc.pid).children(recursive=True) if proc.poll() is None else []
        os.killpg(proc.pid, signal.SIGKILL)
        for child in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        proc.wait()


def main() -> None:
    import tempfile

    from gpudoctor.commands.run import agent_env

    every_s = 5.0
    with tempfile.TemporaryDirectory() as tmp:
        straggler = record([sys.executable, str(HERE / "ddp_job.py"), "--launcher", "spawn", "--init-method", "tcp",
                            "--mode", "compute", "--steps", "100000", "--comm-timer", "none",
                            "--out", f"{tmp}/straggler"], Path(tmp, "straggler"), 60.0, every_s)
        hang = record([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", "2", str(HERE / "hang_job.py"),
                       "--out", f"{tmp}/hang"], Path(tmp, "hang"), 130.0, every_s,
                      env=agent_env(dict(os.environ)), hang_at_s=25.0)
    data = {"every_s": every_s, "note": __doc__.split("\n\n")[1].replace("\n", " "),
            "runs": {"straggler": straggler, "hang": hang}}
    target = HERE / "data" / "prometheus_series.json"
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {target}: {len(straggler)} + {len(hang)} scrapes")


if __name__ == "__main__":
    main()
