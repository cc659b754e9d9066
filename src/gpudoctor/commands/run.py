"""``gpudoctor run [options] -- <cmd …>``: start a training command with the agent inside, and watch it.

The agent reaches every Python process the command starts (every rank under ``torchrun``) through a
``sitecustomize`` directory put first on PYTHONPATH (see ``gpudoctor/agent/bootstrap``); it skips
DataLoader workers and other multiprocessing children, except ``torch.multiprocessing.spawn``
ranks, whose agents start when they join a process group; the session then watches rank 0. The view is the live session's: the
dashboard on a terminal, else a report when the command exits (or after ``--duration``). When the
report goes to stdout as JSON/Markdown or into a pipe, the command's own stdout goes to stderr. Ctrl-C,
SIGTERM and SIGHUP reach the command once, as the shell would deliver them (the terminal sends Ctrl-C
to both; otherwise gpudoctor forwards it: :mod:`gpudoctor.commands.signals`); the first stops the watch
and the report is written while the command saves; gpudoctor then waits for it and never signals it
on its own. In the dashboard, Ctrl-C passes SIGINT to the command and leaves. A command that
cannot be started ends in one sentence and exit status 7; a command that fails is reported with its
own exit status, and gpudoctor then exits 7 as well.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpudoctor.commands.common import (
    add_rule_arguments,
    add_watch_output_arguments,
    exit_status,
    fail_on,
    open_output,
    prepare,
)
from gpudoctor.commands.signals import Relay, child_group_options, signal_name, terminal_foreground
from gpudoctor.exitcodes import ExitCode, UserError

BOOTSTRAP_DIR = Path(__file__).resolve().parent.parent / "agent" / "bootstrap"
PACKAGE_PARENT = Path(__file__).resolve().parent.parent.parent
AGENT_WAIT_S = 60.0
SPAWN_RANK_WAIT_S = 30.0   # how long a spawn parent's agent waits for its ranks' agents to answer
SPAWN_GRACE_S = 10.0       # after torch is imported (and no step yet), how long to look for spawned children
NO_TORCH_WAIT_S = 15.0     # an agent whose program has not imported torch after this is watched anyway
RANK0_WAIT_S = 5.0         # a higher rank's agent answered first: how long rank 0's gets to answer too


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duration", type=float, metavar="SECONDS",
                        help="report after SECONDS (the command keeps running to its end)")
    parser.add_argument("--format", choices=["text", "json", "markdown"], default="text")
    parser.add_argument("-o", "--output", type=Path, default=None, help="write the report to this file")
    parser.add_argument("--no-dashboard", action="store_true", help="never open the dashboard; print a report")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="record a torch.profiler window of N steps once training runs")
    add_watch_output_arguments(parser)
    parser.add_argument("--no-auto-profile", action="store_true",
                        help="do not take the automatic 5-step profile window once steps are seen")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S", help="seconds between readings")
    parser.add_argument("--window", type=float, default=5.0, metavar="S", help="seconds per evaluation window")
    parser.add_argument("--no-stacks", action="store_true", help="do not sample Python stacks with py-spy")
    add_rule_arguments(parser)
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the training command")


def agent_env(base: dict[str, str]) -> dict[str, str]:
    """The command's environment: the bootstrap first on PYTHONPATH, and where to import the agent from."""
    env = dict(base)
    paths = [str(BOOTSTRAP_DIR), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["GPUDOCTOR_AGENT"] = "1"
    env["GPUDOCTOR_AGENT_PATH"] = str(PACKAGE_PARENT)
    return env


def start_command(cmd: list[str], stdout_to_stderr: bool = False,
                  shared_group: bool = True) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with the agent; a command that cannot start is a UserError (TARGET_FAILED).

    ``stdout_to_stderr``: the report owns stdout (JSON/Markdown, or piped), so the command's own
    output goes to stderr and stdout stays machine-readable. ``shared_group``: the command stays in
    gpudoctor's process group (the terminal's foreground one), else it gets its own.
    """
    try:
        return subprocess.Popen(cmd, env=agent_env(dict(os.environ)),
                                stdout=sys.stderr.fileno() if stdout_to_stderr else None,
                                **child_group_options(shared_group))
    except FileNotFoundError:
        raise UserError(f"command not found: {cmd[0]} (check the spelling and your PATH).",
                        ExitCode.TARGET_FAILED) from None
    except PermissionError:
        raise UserError(f"cannot execute {cmd[0]}: permission denied.", ExitCode.TARGET_FAILED) from None
    except OSError as exc:
        raise UserError(f"cannot start {cmd[0]}: {exc.strerror}.", ExitCode.TARGET_FAILED) from None


def find_agent_pid(root_pid: int, timeout_s: float, child: subprocess.Popen[bytes]) -> int | None:
    """The PID to watch: the process in ``root_pid``'s tree whose agent answers (rank 0 first).

    An agent without a rank is taken once its process steps, or has imported torch and, within
    ``SPAWN_GRACE_S``, started no ``multiprocessing`` spawn children (pytorch/examples' ImageNet spawns
    its rank ~5 s after importing torch on a cold H200 machine: 3 s were too few); a parent whose children are
    ``torch.multiprocessing.spawn`` processes (``spawn_main``) is waited past for up to
    ``SPAWN_RANK_WAIT_S``: those children get their agent when they join a process group (the
    bootstrap's hook), and a rank is what trains. Ctrl-C meanwhile raises
    :class:`AgentWaitInterrupted` with the agent found so far.
    """
    deadline = time.monotonic() + timeout_s
    found: list[tuple[int, int]] = []
    try:
        return _find_agent_pid(root_pid, deadline, child, found)
    except KeyboardInterrupt:
        if not found:       # Ctrl-C before a whole pass ended: the command's own agent, if it answers now
            found.extend(_command_agent(child))
        raise AgentWaitInterrupted(found[0][1] if found else None) from None


def _command_agent(child: subprocess.Popen[bytes]) -> list[tuple[int, int]]:
    from gpudoctor.agent.client import find_agent

    client = find_agent(child.pid, timeout_s=0.5) if child.poll() is None else None
    if client is None:
        return []
    client.close()
    return [(-1, child.pid)]


class AgentWaitInterrupted(KeyboardInterrupt):
    """Ctrl-C while waiting for a rank's agent: carries the agent found so far (or None)."""

    def __init__(self, pid: int | None) -> None:
        super().__init__()
        self.pid = pid


def _find_agent_pid(root_pid: int, deadline: float, child: subprocess.Popen[bytes],
                    found: list[tuple[int, int]]) -> int | None:
    import psutil

    from gpudoctor.agent.client import find_agent
    from gpudoctor.agent.protocol import StepSource

    since: dict[str, float] = {}   # when each waiting state was first seen

    def held(state: str, seconds: float) -> bool:
        return time.monotonic() - since.setdefault(state, time.monotonic()) > seconds

    while time.monotonic() < deadline and child.poll() is None:
        try:
            procs = [psutil.Process(root_pid), *psutil.Process(root_pid).children(recursive=True)]
        except psutil.Error:
            return None
        # this pass's agents replace the last pass's only once the pass is over: a Ctrl-C during the
        # pass (0.5 s per process) still finds the agent seen before (CI: an empty list, no report)
        seen: list[tuple[int, int]] = []
        stepping: set[int] = set()
        torch_loaded = False
        for proc in procs:
            client = find_agent(proc.pid, timeout_s=0.5)
            if client is not None:
                rank = client.hello.rank
                torch_loaded = torch_loaded or bool(client.hello.torch)
                if client.hello.step_source is not StepSource.NONE:
                    stepping.add(proc.pid)
                client.close()
                seen.append((rank if isinstance(rank, int) else -1, proc.pid))
        found[:] = _trainers_first(seen, stepping, _parents(procs))
        stepped = bool(stepping)
        ranked = sorted(f for f in found if f[0] >= 0)
        if ranked:
            # rank 0, or the lowest rank once rank 0's agent had a few seconds more to answer
            if ranked[0][0] == 0 or held("ranked", RANK0_WAIT_S):
                return ranked[0][1]
        elif found and stepped:
            return found[0][1]      # it trains (_trainers_first put it first): not a launcher
        elif found and torch_loaded:
            # torch is in: an mp.spawn job spawns its ranks right after, and they join a process group
            if held("torch", SPAWN_RANK_WAIT_S if _has_spawned_children(procs) else SPAWN_GRACE_S):
                return found[0][1]
        elif found and held("no torch", NO_TORCH_WAIT_S):   # a program that never imports torch
            return found[0][1]
        time.sleep(0.1)
    return None


def _parents(procs: list[Any]) -> dict[int, int]:
    """PID -> parent PID over ``procs`` (a process that vanished meanwhile is left out)."""
    out: dict[int, int] = {}
    for proc in procs:
        with contextlib.suppress(Exception):
            out[proc.pid] = proc.ppid()
    return out


def _trainers_first(agents: list[tuple[int, int]], stepping: set[int],
                    parent_of: dict[int, int]) -> list[tuple[int, int]]:
    """``agents`` ((rank, pid) pairs) ordered: those that step, then those that launch no other agent's
    process, then launchers. ``accelerate launch`` with one process (and any Python wrapper that runs
    ``python train.py`` as a child) has an agent and torch itself, but trains in its child."""
    pids = {pid for _, pid in agents}

    def launches_an_agent(pid: int) -> bool:
        for other in pids - {pid}:
            seen: set[int] = set()
            up = parent_of.get(other)
            while up is not None and up not in seen:
                if up == pid:
                    return True
                seen.add(up)
                up = parent_of.get(up)
        return False

    return sorted(agents, key=lambda a: (a[1] not in stepping, launches_an_agent(a[1])))


def _has_spawned_children(procs: list[Any]) -> bool:
    """Whether any process is a ``multiprocessing`` spawn child (a possible ``mp.spawn`` rank)."""
    for proc in procs:
        try:
            if "spawn_main" in " ".join(proc.cmdline()):
                return True
        except Exception:
            continue
    return False


def run(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UserError("nothing to run: put the training command after --, e.g. "
                        "`gpudoctor run -- python train.py`.", ExitCode.USAGE)
    if args.duration is not None and args.duration <= 0:
        raise UserError("--duration must be a positive number of seconds.", ExitCode.USAGE)
    if args.profile < 0 or args.profile > 100:
        raise UserError("--profile takes 1 to 100 steps.", ExitCode.USAGE)
    config, catalog = prepare(args)
    threshold = fail_on(args, config)
    started = time.monotonic()
    report_owns_stdout = args.output is None and (args.format != "text" or not sys.stdout.isatty())
    shared_group = terminal_foreground()
    child = start_command(cmd, stdout_to_stderr=report_owns_stdout, shared_group=shared_group)
    relay = Relay(child.pid, shared_group).install()
    if args.duration is not None:   # said first: after the report, the command is not stopped
        print(f"gpudoctor: the report comes after {args.duration:g} s of watching; the command runs on after it "
              "until it ends (Ctrl-C stops it).", file=sys.stderr)
    try:
        try:
            report = _watch(args, child, catalog, config.options, started, relay)
        except KeyboardInterrupt:   # the relay's first signal, before any report could be made
            report = None
        try:
            if report is not None:
                _render(args, report)
        except KeyboardInterrupt:
            pass
        if relay.stopped and child.poll() is None:
            print(f"gpudoctor: {signal_name(relay.received[0])} passed to the command once; waiting for it "
                  "to finish (its own handler decides when).", file=sys.stderr)
        elif report is not None and child.poll() is None:
            print("gpudoctor: report written; waiting for the command to finish (Ctrl-C stops it).",
                  file=sys.stderr)
        returncode = _wait_child(child)
    finally:
        relay.restore()
    status = _describe_exit(returncode)
    print(f"gpudoctor: the command {status}.", file=sys.stderr)
    if relay.stopped:
        return int(ExitCode.INTERRUPTED)
    if returncode != 0:
        return int(ExitCode.TARGET_FAILED)
    return exit_status(report, threshold) if report is not None else int(ExitCode.OK)


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"was killed by {signal.Signals(-returncode).name}"
        return f"was killed by signal {-returncode}"
    return f"exited with status {returncode}"


def _wait_child(child: subprocess.Popen[bytes]) -> int:
    """Wait for the command to end; a signal meanwhile was already passed on by the relay (the first
    one raises here): gpudoctor never stops the command on its own, a save may take minutes."""
    while True:
        try:
            return child.wait()
        except KeyboardInterrupt:
            continue


def _watch(args: argparse.Namespace, child: subprocess.Popen[bytes], catalog: Any, options: Any,
           started: float, relay: Relay) -> Any:
    """Watch the command with the live session; returns the report or None. A stop signal (the
    relay passed it on already) ends the watch early; the report then holds what was seen."""
    from gpudoctor.commands.attach import AUTO_PROFILE_STEPS
    from gpudoctor.live.report import build_report
    from gpudoctor.live.session import LiveSession
    from gpudoctor.live.watch import watch

    try:
        pid = find_agent_pid(child.pid, AGENT_WAIT_S, child)
    except AgentWaitInterrupted as exc:   # a stop signal before the session started: the relay passed it on
        pid = exc.pid
        if pid is None:
            return None
    if pid is None:
        if child.poll() is None:
            print("gpudoctor: no Python process with the agent appeared in the command within "
                  f"{AGENT_WAIT_S:.0f} s; nothing to watch.", file=sys.stderr)
        return None
    session = LiveSession(pid, catalog, options, use_agent=True, interval_s=args.interval,
                          window_s=args.window, use_stacks=not args.no_stacks,
                          auto_profile_steps=0 if args.profile or args.no_auto_profile else AUTO_PROFILE_STEPS,
                          keep_traces=args.keep_traces)
    interactive = sys.stdout.isatty() and args.output is None and not args.no_dashboard
    if interactive and args.duration is None and not relay.stopped:
        from gpudoctor.tui.app import run_dashboard

        try:
            session.start()
            # closes the session; the agent stays in the command. Ctrl-C there: SIGINT to the command, once
            relay.terminal_raw = True
            run_dashboard(session, on_interrupt=relay.dashboard_interrupt, export_dir=args.export_dir)
        finally:
            relay.terminal_raw = False
            session.close()
        return None
    try:
        session.start()
        if not relay.stopped:
            watch(session, args.duration if args.duration is not None else float("inf"), args.profile,
                  keep_going=lambda: child.poll() is None,
                  say=lambda text: print(f"gpudoctor: {text}", file=sys.stderr))
    except KeyboardInterrupt:
        pass
    finally:
        snap = session.snapshot()
        windows = session.windows
        session.close()
    report = build_report(snap, elapsed_s=time.monotonic() - started, windows=windows)
    report.command = "run"
    report.inputs = [" ".join(args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd)]
    if child.poll() is not None:
        report.notes.append(f"the command {_describe_exit(child.returncode)}.")
    if relay.stopped:
        report.notes.append(f"gpudoctor got {signal_name(relay.received[0])} and passed it to the command once; "
                            "the watch ended there.")
    return report


def _render(args: argparse.Namespace, report: Any) -> None:
    from gpudoctor.report.render import render

    out = open_output(args.output)
    try:
        render(report, args.format, out)
        out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
