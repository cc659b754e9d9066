"""``gpudoctor demo``: start a bundled training job with one planted problem and diagnose it.

Why it exists: a newcomer should see gpudoctor find a real problem in a real job in under a minute,
without bringing their own. The job is ``examples/input_bound.py`` (a DataLoader with
``num_workers=0`` and a heavy per-sample transform; CUDA if present, else CPU), started with the
agent inside exactly as ``gpudoctor run`` does. On a terminal the dashboard opens on it; otherwise
the one-shot report is printed after ``--duration`` seconds (so CI and pipes still see findings).
Either way the demo stops its own job at the end — and only that job.
It must not import torch in gpudoctor's own process (the job has it, we don't need it).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gpudoctor.commands.common import add_rule_arguments, exit_status, prepare
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.severity import Severity

EXAMPLE = "input_bound.py"
AGENT_WAIT_S = 60.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                        help="where the example trains (default: CUDA when present, else CPU)")
    parser.add_argument("--duration", type=float, default=15.0, metavar="SECONDS",
                        help="without a terminal: watch this long, then print the report (default 15)")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text",
                        help="report format without a terminal")
    parser.add_argument("--no-dashboard", action="store_true", help="print the report even on a terminal")
    add_rule_arguments(parser)
    for action in parser._actions:
        if action.dest == "fail_on":
            action.help = ("without a terminal: exit 1 when a finding at or above this severity exists (default: "
                           "exit 0, the demo's findings are planted)")


def example_path() -> Path | None:
    """The bundled example: packaged beside the code (wheel) or in the source checkout."""
    package = Path(__file__).resolve().parent.parent
    for candidate in (package / "examples" / EXAMPLE, package.parent.parent / "examples" / EXAMPLE):
        if candidate.is_file():
            return candidate
    return None


def run(args: argparse.Namespace) -> int:
    if args.duration <= 0:
        raise UserError("--duration must be a positive number of seconds.", ExitCode.USAGE)
    script = example_path()
    if script is None:
        raise UserError(f"the bundled example {EXAMPLE} is missing from this installation; reinstall gpudoctor.",
                        ExitCode.USAGE)
    if importlib.util.find_spec("torch") is None:
        raise UserError(f"the demo trains with PyTorch, which this Python ({sys.executable}) lacks: "
                        "pip install torch, then run it again.", ExitCode.TARGET_FAILED)
    config, catalog = prepare(args)
    interactive = sys.stdout.isatty() and not args.no_dashboard
    with tempfile.TemporaryDirectory(prefix="gpudoctor-demo-") as tmp:
        log_path = Path(tmp) / "job.log"
        child = _start_job(script, args.device, log_path)
        try:
            return _diagnose(args, child, log_path, catalog, config.options, interactive)
        finally:
            _stop_job(child)


def _start_job(script: Path, device: str, log_path: Path) -> subprocess.Popen[bytes]:
    from gpudoctor.commands.run import agent_env

    print(f"gpudoctor demo: starting {script.name} (device {device}) with a planted problem…", file=sys.stderr)
    with log_path.open("wb") as log:  # the job's own output would scribble over the dashboard
        return subprocess.Popen([sys.executable, str(script), "--steps", "0", "--device", device],
                                env=agent_env(dict(os.environ)), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=script.parent, start_new_session=True)


def _diagnose(args: argparse.Namespace, child: subprocess.Popen[bytes], log_path: Path, catalog: object,
              options: object, interactive: bool) -> int:
    from gpudoctor.commands.attach import AUTO_PROFILE_STEPS
    from gpudoctor.commands.run import find_agent_pid
    from gpudoctor.live.report import build_report
    from gpudoctor.live.session import LiveSession
    from gpudoctor.live.watch import watch
    from gpudoctor.report import render

    pid = find_agent_pid(child.pid, AGENT_WAIT_S, child)
    if pid is None:
        tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
        why = f": {' / '.join(tail)}" if tail else ""
        raise UserError(f"the example job stopped before it could be watched{why}", ExitCode.TARGET_FAILED)
    window_s = 5.0 if interactive else max(1.0, min(5.0, args.duration / 5))
    session = LiveSession(pid, catalog, options, use_agent=True, window_s=window_s,  # type: ignore[arg-type]
                          auto_profile_steps=AUTO_PROFILE_STEPS)
    if interactive:
        from gpudoctor.tui.app import run_dashboard

        session.start()
        # detaches on quit; _stop_job then ends the demo's own job
        return run_dashboard(session, job_stops="the demo stops its example job now.")
    session.start()
    started = time.monotonic()
    try:
        # torch's import and the first batches take a while on a small machine: count from the first step.
        session.wait_until(lambda s: s.steps is not None and s.steps.steps_total > 0, AGENT_WAIT_S)
        print(f"gpudoctor demo: watching pid {pid} for {args.duration:.0f} s (no terminal: printing a report).",
              file=sys.stderr)
        watch(session, args.duration, keep_going=lambda: child.poll() is None)
        snapshot = session.snapshot()
        windows = session.windows
    finally:
        session.close()
    report = build_report(snapshot, elapsed_s=time.monotonic() - started, windows=windows)
    report.command = "demo"
    report.inputs = [f"examples/{EXAMPLE} (pid {pid})"]
    render(report, args.format)
    if args.fail_on is None:
        return int(ExitCode.OK)  # findings are the point of a demo, not a failure, unless --fail-on asks
    return exit_status(report, Severity.parse(args.fail_on))


def _stop_job(child: subprocess.Popen[bytes]) -> None:
    """End the demo's own job (and its DataLoader workers, in its session) — nothing else."""
    if child.poll() is not None:
        return
    import signal

    try:
        os.killpg(child.pid, signal.SIGTERM)
        child.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    except ProcessLookupError:
        pass
