"""``gpudoctor attach <pid>``: diagnose a running training process, then leave it running.

- ``--once``: one quick snapshot (two short evaluation windows, ~4–7 s) and a report. It uses an agent
  that already runs in the process (``gpudoctor run``) but injects none: injecting costs the target
  a start-up pause and step statistics need many steps anyway.
- ``--duration S``: watch for S seconds (optionally profiling N steps through the agent), then report;
  it returns within S + a few seconds whatever the target does (:func:`gpudoctor.live.watch.watch`).
- neither, on a terminal: the Textual dashboard over the same :class:`LiveSession`; not on a
  terminal: the ``--once`` report.

Ended by any signal (Ctrl-C, SIGTERM, SIGHUP, ``timeout 5 gpudoctor attach …``), attach detaches
the agent it injected and writes the report of what it saw (the dashboard detaches and leaves), exit
status 130; a second signal meanwhile cannot cut that short (:mod:`gpudoctor.commands.signals`).

A PID that does not exist, belongs to another user, or is not a Python process ends in one
sentence and its own exit code (3, 4, 5). A non-Python PID is refused rather than shown with GPU
readings only: the diagnosis is about the Python training loop, so the sentence names the Python
child to attach to when there is one.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from gpudoctor.commands.common import (
    add_rule_arguments,
    add_watch_output_arguments,
    exit_status,
    fail_on,
    open_output,
    prepare,
)
from gpudoctor.commands.signals import Relay, signal_name
from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.live.process import check_target, launched_program, python_version
from gpudoctor.live.report import build_report
from gpudoctor.live.session import LiveSession
from gpudoctor.live.watch import watch
from gpudoctor.report.render import render

#: --once judges two windows; py-spy records whole seconds, so each stack window lasts 2 s, and a
#: shorter cut leaves too few samples once py-spy's own start-up (0.2–1 s under load) is taken off.
ONCE_WINDOW_S = 1.5
ONCE_TIMEOUT_S = 12.0


#: Steps of the profile window that attach takes on its own (dashboard and --duration; never --once).
AUTO_PROFILE_STEPS = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("pid", type=int, help="PID of the Python training process")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="one quick snapshot and report (about 4-7 s)")
    mode.add_argument("--duration", type=float, metavar="SECONDS",
                      help="watch for SECONDS, then print the report and exit (the process keeps running)")
    mode.add_argument("--headless", action="store_true",
                      help="no dashboard: watch until Ctrl-C or the process exits, then report (see --prometheus)")
    parser.add_argument("--prometheus", type=int, default=None, metavar="PORT",
                        help="serve per-rank metrics and active findings for Prometheus on PORT (docs/prometheus.md)")
    parser.add_argument("--prometheus-addr", default="127.0.0.1", metavar="ADDR",
                        help="address to serve --prometheus on (default 127.0.0.1: this machine only)")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write the report to this file")
    parser.add_argument("--no-agent", action="store_true",
                        help="passive only: do not inject the in-process agent (no step timings)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="record a torch.profiler window of N steps during the watch (needs the agent)")
    add_watch_output_arguments(parser)
    parser.add_argument("--no-auto-profile", action="store_true",
                        help=f"do not take the automatic {AUTO_PROFILE_STEPS}-step profile window once steps are seen "
                             "(the verdict and estimates then rest on NVML and the agent's timings only)")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between GPU/process readings (default 1)")
    parser.add_argument("--window", type=float, default=5.0, metavar="S",
                        help="seconds per py-spy/evaluation window (default 5)")
    parser.add_argument("--no-stacks", action="store_true", help="do not sample Python stacks with py-spy")
    add_rule_arguments(parser)


def _check(pid: int) -> None:
    try:
        check_target(pid)
    except UserError as exc:
        if exc.code != ExitCode.NOT_PYTHON:
            raise
        child = _python_child(pid)
        if child is not None:
            raise UserError(f"PID {pid} is not a Python process; its Python child is PID {child}: run "
                            f"`gpudoctor attach {child}`.", ExitCode.NOT_PYTHON) from None
        raise


def _short(cmd: str, limit: int = 80) -> str:
    return cmd if len(cmd) <= limit else cmd[:limit - 1] + "…"


def _python_child(pid: int) -> int | None:
    try:
        ours = {psutil.Process().pid, *(p.pid for p in psutil.Process().parents())}  # never suggest ourselves
        for child in psutil.Process(pid).children(recursive=True):
            if child.pid not in ours and python_version(child) is not None:
                return int(child.pid)
    except psutil.Error:
        return None
    return None


def run(args: argparse.Namespace) -> int:
    # SIGTERM/SIGHUP stop attach as Ctrl-C does (the session is closed, the agent detached, the
    # report written); later signals are ignored until then. The target is never signalled.
    with Relay() as relay:
        try:
            return _run(args, relay)
        except KeyboardInterrupt:   # a signal before the session existed: nothing to detach
            return int(ExitCode.INTERRUPTED)


def _run(args: argparse.Namespace, relay: Relay) -> int:
    if not 0 < args.pid < 2**31:
        raise UserError(f"PID must be a positive process id, not {args.pid}.", ExitCode.USAGE)
    if args.duration is not None and args.duration <= 0:
        raise UserError("--duration must be a positive number of seconds.", ExitCode.USAGE)
    if args.interval <= 0 or args.window < 1:
        raise UserError("--interval must be positive and --window at least 1 second.", ExitCode.USAGE)
    if args.profile < 0 or args.profile > 100:
        raise UserError("--profile takes 1 to 100 steps.", ExitCode.USAGE)
    _check(args.pid)
    pid, launched = args.pid, launched_program(args.pid)
    if launched is not None:
        pid = launched[0]
    if not args.no_agent:
        _trusted_agent_socket(pid)
    config, catalog = prepare(args)
    threshold = fail_on(args, config)
    interactive = sys.stdout.isatty() and args.output is None
    once = args.once or (args.duration is None and not interactive and not args.headless)
    window_s = ONCE_WINDOW_S if once else args.window
    if args.duration is not None:  # at least ~5 windows per watch, so hysteresis can confirm findings
        window_s = max(1.0, min(window_s, args.duration / 6))
    # --once stays quick and passive: it uses an agent that already runs but injects none.
    agent_mode = "off" if args.no_agent else "find" if once else "inject"
    auto_profile = 0 if once or args.no_agent or args.no_auto_profile or args.profile else AUTO_PROFILE_STEPS
    session = LiveSession(pid, catalog, config.options, agent=agent_mode,
                          interval_s=args.interval, window_s=window_s, use_stacks=not args.no_stacks,
                          auto_profile_steps=auto_profile, keep_traces=args.keep_traces)
    if launched is not None:
        session.add_note("launcher", f"PID {args.pid} only launches `{_short(launched[1])}` (PID {pid}), which "
                                     f"does the work: watching PID {pid}.")
    if args.prometheus is not None and not 0 <= args.prometheus <= 65535:
        raise UserError("--prometheus takes a TCP port from 0 to 65535.", ExitCode.USAGE)
    exporter = _start_exporter(session, args)
    if not once and args.duration is None and not args.headless:
        dashboard = _dashboard()
        if dashboard is not None:
            try:
                session.start()
                return int(dashboard(session, export_dir=args.export_dir))
            finally:
                session.close()
                if exporter is not None:
                    exporter.close()
    started = time.monotonic()
    interrupted = False
    try:
        session.start()
        if once:
            session.wait_windows(2, ONCE_TIMEOUT_S)
        else:
            duration = args.duration if args.duration is not None else float("inf") if args.headless else 30.0
            watch(session, duration, args.profile, say=lambda text: print(f"gpudoctor: {text}", file=sys.stderr))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        snap = session.snapshot()
        windows = session.windows
        session.close()
        if exporter is not None:
            exporter.close()
    report = build_report(snap, elapsed_s=time.monotonic() - started, windows=windows,
                          first_finding_s=dict(session.first_finding_at))
    if relay.stopped:
        report.notes.append(f"gpudoctor got {signal_name(relay.received[0])}: the watch ended there and the "
                            "agent was detached; the process keeps running.")
    out = open_output(args.output)
    try:
        render(report, args.format, out)
    finally:
        if out is not sys.stdout:
            out.close()
    if interrupted or relay.stopped:
        return int(ExitCode.INTERRUPTED)
    return exit_status(report, threshold)


def _trusted_agent_socket(pid: int) -> None:
    """Refuse (exit 8) when the only agent socket for ``pid`` lies where its user does not own it
    alone: another user may have planted it to answer in the agent's name (``agent.paths``)."""
    from gpudoctor.agent.paths import untrusted_socket

    why = untrusted_socket(pid)
    if why is not None:
        raise UserError(why[0].upper() + why[1:], ExitCode.UNTRUSTED_AGENT)


def _start_exporter(session: LiveSession, args: argparse.Namespace) -> Any:
    """The Prometheus exporter when ``--prometheus`` is given (scrapes read the session's snapshot)."""
    if args.prometheus is None:
        return None
    from gpudoctor.live.prometheus import start_exporter

    exporter = start_exporter(session, args.prometheus, args.prometheus_addr)
    print(f"gpudoctor: Prometheus metrics at {exporter.url}", file=sys.stderr, flush=True)
    return exporter


def _dashboard() -> Callable[..., int] | None:
    try:
        from gpudoctor.tui.app import run_dashboard
    except ImportError:
        return None
    return run_dashboard
