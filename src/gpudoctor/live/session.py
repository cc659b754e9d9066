"""A live diagnosis session on one training process: the object every live view reads.

The session polls the collectors in background threads at their own rates (NVML and the process
tree every ``interval_s``, /dev/shm every 5 s, py-spy in rolling ``window_s`` windows, the agent's
step statistics once a second), turns each window's readings into fact sets, runs the live rules
with hysteresis, and offers :meth:`snapshot` (never blocks for long), :meth:`history` (for
sparklines), :meth:`profile` (a torch.profiler window through the agent, then trace analysis) and
:meth:`close` (detach; the target keeps running).

Both ``gpudoctor attach --once/--duration`` and the Textual dashboard are views of this object.
It must never harm the target: every collector only reads from outside, the agent is reached only
through its client, and any failure becomes one line in ``Snapshot.notes`` or ``AgentState``.
No textual/rich imports here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from gpudoctor.bottleneck import Bottleneck
from gpudoctor.catalog import Catalog
from gpudoctor.catalog.engine import evaluate
from gpudoctor.catalog.finalize import finalize
from gpudoctor.catalog.merge import judged_clear
from gpudoctor.live import stacks as stacks_mod
from gpudoctor.live import tracefiles
from gpudoctor.live.agentlink import AgentLink
from gpudoctor.live.bottleneck import INPUT_BOUND_PCT, live_bottleneck, reconciled_bottleneck
from gpudoctor.live.facts import LOADER_CONTEXT, build_factsets, steps_in_window
from gpudoctor.live.hysteresis import Hysteresis
from gpudoctor.live.nvml import NvmlCollector, NvmlUnavailable
from gpudoctor.live.priority import lower_thread_priority
from gpudoctor.live.process import ProcessCollector
from gpudoctor.live.profileanalysis import analyze_profile_traces
from gpudoctor.live.rankprofile import RankProfile, rank_profile_rows
from gpudoctor.live.rankwatch import RankMonitor
from gpudoctor.live.samples import (
    AgentState,
    GpuSample,
    ProcessSample,
    ShmSample,
    Snapshot,
    StackSample,
)
from gpudoctor.live.shm import ShmCollector
from gpudoctor.live.warmup import WarmUpGate
from gpudoctor.model import Finding, NotEvaluated, Source

log = logging.getLogger("gpudoctor.live.session")

SHM_INTERVAL_S = 5.0
#: How long :meth:`LiveSession.close` waits for its threads, all together.
CLOSE_JOIN_S = 3.0
#: A stack window in which the training thread ran our agent's code more than this share is skipped.
AGENT_BUSY_PCT = 20.0
#: Raw step times kept for the report (``steps.step_ms``, what ``compare`` bootstraps); the newest win.
STEP_SAMPLES_MAX = 2000
#: Agent polls (one a second) kept to count the steps of an evaluation window.
STEP_TOTALS_MAX = 600
#: The automatic profile window waits for a warmed-up loop (:class:`~gpudoctor.live.warmup.WarmUpGate`),
#: and the agent ends it after this long whatever the loop does (CUPTI is torn down after it).
AUTO_PROFILE_TIMEOUT_S = 30.0


class LiveSession:
    """Watches one process. Thread-safe; call :meth:`start` once and :meth:`close` once."""

    def __init__(self, pid: int, catalog: Catalog, options: Mapping[str, Mapping[str, Any]] | None = None, *,
                 agent: str = "inject", interval_s: float = 1.0, window_s: float = 5.0,
                 use_stacks: bool = True, history_len: int = 600, on_windows: int = 2, off_windows: int = 2,
                 nvml: NvmlCollector | None = None, use_agent: bool | None = None,
                 auto_profile_steps: int = 0, keep_traces: bool = False) -> None:
        """``agent``: ``inject`` (find or inject the agent), ``find`` (only one already running), ``off``.
        ``use_agent`` is the older boolean form (True = inject, False = off). ``auto_profile_steps``: once
        the agent has seen steps, take one profile window of that many steps on its own, so that the
        bottleneck verdict and the impact estimates rest on a trace within seconds (0: never).
        ``keep_traces``: leave the profile traces where the agent wrote them once analysed (by default
        they are removed, and the report's note says so)."""
        self.keep_traces = keep_traces
        if use_agent is not None:
            agent = "inject" if use_agent else "off"
        self.pid = pid
        self.catalog = catalog
        self.options = options or {}
        self.interval_s = interval_s
        self.window_s = window_s
        self.started_at = time.time()
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._closed = False
        self._new_window = threading.Condition(self._lock)
        self._threads: list[threading.Thread] = []
        self._nvml = nvml if nvml is not None else NvmlCollector()
        self._proc_collector = ProcessCollector(pid)
        self._ranks: RankMonitor | None = None  # several local ranks: per-rank facts (GD601/GD610)
        self._rank_profile: RankProfile | None = None   # one profile window on every rank at once
        self._rank_profile_rows: tuple[dict[str, Any], ...] = ()
        self._shm_collector = ShmCollector(pid)
        self._use_stacks = use_stacks
        self._agent = AgentLink(pid, agent)
        self._hysteresis = Hysteresis(on_windows, off_windows)
        self._notes: dict[str, str] = {}
        self._gpu_hist: deque[tuple[GpuSample, ...]] = deque(maxlen=history_len)
        self._history: deque[Snapshot] = deque(maxlen=history_len)
        self._process: ProcessSample | None = None
        self._last_alive: ProcessSample | None = None
        self._shm: ShmSample | None = None
        self._stacks: StackSample | None = None
        self._findings: list[Finding] = []
        self._not_evaluated: list[NotEvaluated] = []
        self._profile_findings: list[Finding] = []
        self._trace_clear: frozenset[str] = frozenset()   # rules the last profile window judged and cleared
        self._profile_bottleneck: Bottleneck | None = None  # from the last profile window's trace
        self._live_bottleneck: Bottleneck | None = None     # from the agent's timings and NVML
        self._live_job: dict[str, Any] = {}                   # the last window's job facts (data wait, step)
        self._windows = 0
        self._stack_windows = 0
        self._exited_at: float | None = None
        self._stopped_at: float | None = None          # when the target was first seen stopped (state T)
        self.first_finding_at: dict[str, float] = {}   # rule code → seconds after start it first showed
        self._step_samples: deque[float] = deque(maxlen=STEP_SAMPLES_MAX)
        self._samples_total: int | None = None          # agent's steps_total at the last poll
        self._step_totals: deque[tuple[float, int]] = deque(maxlen=STEP_TOTALS_MAX)  # (time, steps_total) per poll
        self._profile_was_busy = False
        self._profile_busy_at: float | None = None      # last poll that found a profile window running
        self._auto_profile_steps = auto_profile_steps
        self._auto_profile_asked = False
        self._warm_up = WarmUpGate()

    # ---- lifecycle -------------------------------------------------------------------------
    def start(self) -> LiveSession:
        swept = tracefiles.sweep_stale(tracefiles.private_dirs((os.geteuid(), self._target_uid())))
        if swept:
            self._note("traces", f"removed {swept} profile traces left by earlier watches (a day old, their job gone).")
        try:
            self._nvml.open()
        except NvmlUnavailable as exc:
            self._note("nvml", str(exc))
        self._ranks = RankMonitor.for_target(self.pid, self.window_s, self.options)
        if self._ranks is not None:
            self._rank_profile = RankProfile(self._ranks.watch)
            if self._agent.mode == "inject":
                self._ranks.watch.start_injection()
            if self.pid not in self._ranks.pids:
                self._agent.disable("the target launches the job's ranks: the agents run in the ranks "
                                    "(see the rank table), not in the launcher.")
        self._spawn("gpudoctor-poll", self._poll_loop)
        self._spawn("gpudoctor-agent", self._agent_loop)
        if self._use_stacks:
            self._spawn("gpudoctor-stacks", self._stacks_loop)
        else:
            self._note("stacks", "py-spy stack sampling is off.")
        self._spawn("gpudoctor-eval", self._eval_loop)
        return self

    def close(self) -> None:
        """Stop every thread, detach the agent we injected, leave the target running.

        Bounded: the threads get CLOSE_JOIN_S together (a trace analysis in flight is abandoned: it
        runs in a child process that its own time limit ends), then the agent is detached. A second
        call does nothing."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        with self._new_window:
            self._new_window.notify_all()
        deadline = time.monotonic() + CLOSE_JOIN_S
        for thread in self._threads:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        self._agent.close()
        if self._ranks is not None:
            self._ranks.close()
        self._nvml.close()

    def __enter__(self) -> LiveSession:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        def guarded() -> None:
            lower_thread_priority()
            try:
                target()
            except Exception as exc:  # a bug in a collector must not take the session down
                log.debug("%s crashed", name, exc_info=True)
                self._note(name, f"{name} stopped after an internal error: {type(exc).__name__}: {exc}")
        thread = threading.Thread(target=guarded, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def add_note(self, key: str, text: str) -> None:
        """A one-line remark for the report's notes (``key`` replaces an earlier note of that key)."""
        self._note(key, text)

    def _note(self, key: str, text: str) -> None:
        with self._lock:
            self._notes[key] = text

    @property
    def target_alive(self) -> bool:
        return self._exited_at is None

    @property
    def windows(self) -> int:
        with self._lock:
            return self._windows

    # ---- collector loops -------------------------------------------------------------------
    def _poll_loop(self) -> None:
        next_shm = 0.0
        while not self._stop.is_set():
            tick = time.monotonic()
            proc = self._proc_collector.sample()
            tree = [proc.pid, *[w.pid for w in proc.workers]]
            if self._ranks is not None:  # sibling ranks of the same job are not "other processes" (GD703)
                tree.extend(p for p in self._ranks.pids if p not in tree)
            gpus = self._nvml.sample(tree) if self._nvml.opened and proc.alive else ()
            shm = None
            if tick >= next_shm and proc.alive:
                shm = self._shm_collector.sample(tree)
                next_shm = tick + SHM_INTERVAL_S
            with self._lock:
                if proc.alive:
                    self._process = proc
                    self._last_alive = proc
                    self._note_stopped_locked(proc)
                elif self._exited_at is None:
                    self._exited_at = time.time()
                    self._process = (dataclasses.replace(self._last_alive, alive=False, timestamp=proc.timestamp)
                                     if self._last_alive else proc)
                    self._notes["exited"] = (f"the process {self.pid} exited at "
                                             f"{time.strftime('%H:%M:%S', time.localtime(self._exited_at))}; "
                                             "showing its last readings.")
                if gpus:
                    self._gpu_hist.append(gpus)
                if shm is not None:
                    self._shm = shm
                self._history.append(self._snapshot_locked())
            if not proc.alive:
                self._stop.set()
                with self._new_window:
                    self._new_window.notify_all()
                return
            self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - tick)))

    def _note_stopped_locked(self, proc: ProcessSample) -> None:
        """A target stopped by a signal (state T) does no work: say so while it lasts, and after."""
        if proc.stopped:
            self._stopped_at = self._stopped_at or proc.timestamp
            self._notes["stopped"] = (f"the process {self.pid} is stopped (state T: SIGSTOP or Ctrl-Z) and does no "
                                      f"work; `kill -CONT {self.pid}` resumes it.")
        elif self._stopped_at is not None:
            self._notes.pop("stopped", None)
            self._notes["was-stopped"] = (f"the process {self.pid} was stopped for "
                                          f"{proc.timestamp - self._stopped_at:.0f} s during the watch (state T).")
            self._stopped_at = None

    def _stacks_loop(self) -> None:
        binary = stacks_mod.find_pyspy()
        if binary is None:
            self._note("stacks", "py-spy is not installed (pip install py-spy): no stack sampling.")
            return
        # Never sample while the agent is being injected: one ptrace user at a time, and the
        # target is busy with the agent's start-up anyway.
        while not self._agent.settled and not self._stop.wait(0.1):
            pass
        while not self._stop.is_set():
            window_start = time.time()
            try:
                sample = stacks_mod.record_window(self.pid, self.window_s, binary=binary, stop=self._stop)
            except stacks_mod.PySpyUnavailable as exc:
                if self.target_alive and not self._stop.is_set():
                    self._note("stacks", f"no stack sampling: {exc}")
                return
            if self._stop.is_set() and sample.window_s < self.window_s * 0.8:
                return  # a window cut short by close(): not representative
            agent_pct = sample.share_pct.get("gpudoctor_agent", 0.0)
            if agent_pct > AGENT_BUSY_PCT:
                self._note("agent-busy", f"the training thread spent {agent_pct:.0f}% of a stack window in "
                           "gpudoctor's agent (start-up or profile export); that window is not judged.")
                continue
            if self._agent.disturbs(window_start):
                continue  # the target was busy starting the injected agent
            with self._lock:
                self._notes.pop("agent-busy", None)
            with self._new_window:
                self._stacks = sample
                self._new_window.notify_all()

    def _agent_loop(self) -> None:
        self._agent.connect()
        self._keep_step_samples()
        while not self._stop.wait(1.0):
            self._agent.poll()
            self._keep_step_samples()
            detail = self._agent.state().profile_detail
            if detail:
                self._note("profile-window", f"profile window: {detail}")
            self._maybe_auto_profile()
            self._merge_profile_findings()

    def _maybe_auto_profile(self) -> None:
        """Ask once for a short profile window when steps have been seen and no window was asked for."""
        if not self._auto_profile_steps or self._auto_profile_asked:
            return
        steps = self._agent.steps
        state = self._agent.state().profile_state
        if steps is None or (state is not None and not state.over):
            return
        if not self._warm_up.ready(steps.steps_total, steps.window_steps, steps.unique_graphs, time.monotonic()):
            return
        self._auto_profile_asked = True
        said = self.profile(self._auto_profile_steps, timeout_s=AUTO_PROFILE_TIMEOUT_S)
        late = f" ({self._warm_up.reason})" if self._warm_up.reason else ""
        # the window's outcome is its own note ("profile window: …", then the trace's analysis): a state
        # said here ("armed") would stay in the report after the window ended
        outcome = "" if said.startswith("profiling ") else f": {said}"
        self._note("auto-profile", f"automatic {self._auto_profile_steps}-step profile window (--no-auto-profile "
                                   f"turns it off){late}{outcome}")

    def _keep_step_samples(self) -> None:
        """Keep the step times the agent reported since the previous poll (``recent_step_times_ms``,
        de-duplicated by ``steps_total``). Steps before the first poll, and steps between asking for a
        profile window and its analysis (profiler overhead, trace export), are left out."""
        reply = self._agent.last_stats
        if reply is None:
            return
        total, recent = reply.stats.steps_total, reply.recent_step_times_ms
        if not isinstance(total, int):
            return
        stamp = reply.stats.timestamp  # the agent's clock when it answered: a stale reply adds nothing
        with self._lock:
            if isinstance(stamp, (int, float)) and (not self._step_totals or stamp > self._step_totals[-1][0]):
                self._step_totals.append((float(stamp), total))
        state = self._agent.state().profile_state
        busy = state is not None and not state.over
        if state is not None and state.busy:   # armed or recording; analysing: the job runs unhindered
            self._profile_busy_at = time.time()
        previous, self._samples_total = self._samples_total, total
        skip = busy or self._profile_was_busy
        self._profile_was_busy = busy
        if previous is None or total <= previous or skip:
            if skip and previous is not None and total > previous:
                self._note("step-samples", "step times recorded while a profile window ran are left out of "
                           "the report's step samples.")
            return
        fresh = [float(x) for x in recent[-min(total - previous, len(recent)):]
                 if isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0]
        with self._lock:
            self._step_samples.extend(fresh)

    def _eval_loop(self) -> None:
        """One rules evaluation per stack window (or per ``window_s`` without py-spy)."""
        last_stack: StackSample | None = None
        while not self._stop.is_set():
            with self._new_window:
                if self._stacks is last_stack:
                    self._new_window.wait(timeout=self.window_s * 1.5)
                if self._stop.is_set():
                    return
                if (self._stacks is last_stack and self._stacks is not None and self._use_stacks
                        and "stacks" not in self._notes):
                    continue  # py-spy is running; its window is the clock (before its first window: the timer)
                new_stack = self._stacks is not last_stack
                last_stack = self._stacks
            self.evaluate_now(new_stack_window=new_stack)

    # ---- evaluation ------------------------------------------------------------------------
    def evaluate_now(self, new_stack_window: bool = False) -> None:
        """Judge the rules on the latest window and update the shown findings (hysteresis)."""
        now = time.time()
        with self._lock:
            horizon = now - self.window_s
            gpu_window: dict[int, list[GpuSample]] = {}
            for reading in self._gpu_hist:
                for gpu in reading:
                    if gpu.timestamp >= horizon:
                        gpu_window.setdefault(gpu.index, []).append(gpu)
            # the poll that last saw the window running is up to a poll (1 s) before its end
            profiling = self._profile_busy_at is not None and now - self._profile_busy_at < self.window_s + 1.0
            factsets = build_factsets(self.pid, list(gpu_window.values()), self._process, self._shm,
                                      self._stacks, self._agent.steps, now - self.started_at,
                                      steps_in_window(self._step_totals, now, self.window_s), profiling)
        if self._ranks is not None:
            factsets.extend(self._ranks.evaluate(now, self._gpu_hist[-1] if self._gpu_hist else ()))
        result = evaluate(self.catalog, factsets, [Source.LIVE], self.options)
        for error in result.errors:
            log.warning("%s", error)
        job = next((fs.values for fs in factsets if fs.scope == "job"), {})
        with self._lock:
            self._live_bottleneck = live_bottleneck(job)
            self._live_job = dict(job)
            self._findings = self._hysteresis.update(result.findings, now)
            self._not_evaluated = result.not_evaluated
            self._windows += 1
            self._stack_windows += int(new_stack_window)
            for f in self._findings:
                self.first_finding_at.setdefault(f.code, now - self.started_at)

    # ---- profile ---------------------------------------------------------------------------
    def profile(self, steps: int, timeout_s: float = 120.0) -> str:
        """Ask for a ``steps``-step torch.profiler window — on every rank at once when the job has
        several — and return one status sentence. The agent ends the window after ``timeout_s``
        (and falls back to a time window when no step boundary comes)."""
        if self._rank_profile is not None:
            return self._rank_profile.request(steps)
        return self._agent.request_profile(steps, timeout_s)

    def agents_settled(self) -> bool:
        """True once the target's agent, and every rank's, is connected or known to be unavailable."""
        if self._ranks is not None and not self._ranks.agents_settled():
            return False
        return self._agent.settled

    def _merge_rank_profile(self) -> None:
        paths = self._rank_profile.poll() if self._rank_profile is not None else None
        if not paths:
            return
        findings, note, report = analyze_trace_set(paths, self.catalog, self.options, self._loader_context())
        note += self._dispose_traces(paths, report is not None)
        if self._rank_profile is not None:
            self._rank_profile.outcome = (f"analysed {len(paths)} rank traces" if report is not None
                                          else "failed: " + note)
        with self._lock:
            self._keep_profile_locked(findings, report)
            self._rank_profile_rows = rank_profile_rows(report)
            self._notes["profile"] = note

    def _merge_profile_findings(self) -> None:
        self._merge_rank_profile()
        trace = self._agent.take_finished_trace()
        if trace is None:
            return
        findings, note, report = analyze_trace_set([trace], self.catalog, self.options, self._loader_context())
        note += self._dispose_traces([trace], report is not None)
        self._agent.mark_analysed()
        with self._lock:
            self._keep_profile_locked(findings, report)
            if report is not None and report.bottleneck is not None:
                self._profile_bottleneck = report.bottleneck
            if note:
                self._notes["profile"] = note

    def _input_bound_pct(self) -> float:
        """GD102's ``max_dataloader_pct`` as the user set it (the data wait from which the GPU waits)."""
        rule = self.catalog.get("GD102")
        resolved = {**(rule.options if rule is not None else {}), **(self.options.get("GD102") or {})}
        return float(resolved.get("max_dataloader_pct", INPUT_BOUND_PCT))

    def _dispose_traces(self, paths: list[str], analysed: bool) -> str:
        """Remove analysed profile traces from the agent's private directory (live/tracefiles.py), or
        rename them ``kept-…`` with ``keep_traces``; what the note should add."""
        return tracefiles.dispose(paths, analysed, self.keep_traces,
                                  tracefiles.private_dirs((os.geteuid(), self._target_uid())))

    def _target_uid(self) -> int:
        try:
            return os.stat(f"/proc/{self.pid}").st_uid
        except OSError:
            return os.geteuid()

    def _loader_context(self) -> dict[str, Any]:
        """What the job's live facts say of its DataLoader that a profile window's trace cannot show
        (GD102's bound: ``live.facts.LOADER_CONTEXT``)."""
        with self._lock:
            return {k: self._live_job[k] for k in LOADER_CONTEXT if self._live_job.get(k) is not None}

    def _keep_profile_locked(self, findings: list[Finding], report: Any) -> None:
        """A profile window's findings, and the rules it judged and found nothing for (``cleared_by``)."""
        self._profile_findings = findings
        if report is not None:
            self._trace_clear = judged_clear(self.catalog, Source.TRACE, report.findings, report.not_evaluated)

    # ---- views -----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The latest state, with the raw step samples (history snapshots leave them out)."""
        with self._lock:
            return dataclasses.replace(self._snapshot_locked(), step_samples_ms=tuple(self._step_samples))

    def _snapshot_locked(self) -> Snapshot:
        latest_gpus = self._gpu_hist[-1] if self._gpu_hist else ()
        seen = [*self._findings, *self._profile_findings]
        bottleneck = (reconciled_bottleneck(self._profile_bottleneck, self._live_job, self._input_bound_pct())
                      if self._profile_bottleneck is not None else self._live_bottleneck)
        findings = finalize(seen, self.catalog, options=self.options, cleared={Source.TRACE: self._trace_clear},
                            live=self._live_job, verdict_line=bottleneck.line if bottleneck else None)
        withdrawn = sorted({f.code for f in seen} - {f.code for f in findings})
        notes = tuple(self._notes.values()) + ((
            f"{', '.join(withdrawn)}: the profile window judged it and found nothing to fix; the live reading, "
            "which could not say what it costs, is withdrawn.",) if withdrawn else ())
        return Snapshot(
            timestamp=time.time(), started_at=self.started_at, target_pid=self.pid,
            process=self._process, gpus=latest_gpus, shm=self._shm, stacks=self._stacks,
            steps=self._agent.steps, agent=self._agent.state(),
            findings=tuple(findings),
            bottleneck=bottleneck,
            not_evaluated=tuple(self._not_evaluated), notes=notes,
            ranks=self._ranks.pids if self._ranks is not None else (),
            rank_table=self._ranks.table if self._ranks is not None else (),
            rank_profile_status=self._rank_profile.label() if self._rank_profile and self._rank_profile.statuses else None,
            rank_profile=self._rank_profile_rows,
        )

    def history(self) -> list[Snapshot]:
        """Recent snapshots, oldest first (one per ``interval_s``) for sparklines."""
        with self._lock:
            return list(self._history)

    def _windows_done(self, count: int) -> bool:
        with self._lock:
            stacks_done = (self._stack_windows >= count or not self._use_stacks or "stacks" in self._notes)
            return self._windows >= count and stacks_done

    def wait_windows(self, count: int, timeout_s: float) -> bool:
        """Block until ``count`` evaluation windows ran — with ``count`` py-spy windows among them
        while py-spy works — or the target exited; False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._windows_done(count) or self._stop.is_set():
                return self._windows_done(count)
            time.sleep(0.05)
        return False

    def wait_until(self, predicate: Callable[[Snapshot], bool], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if predicate(self.snapshot()):
                return True
            time.sleep(0.1)
        return False


def analyze_trace_set(paths: list[str], catalog: Catalog, options: Mapping[str, Mapping[str, Any]],
                      context: Mapping[str, Any] | None = None) -> tuple[list[Finding], str, Any]:
    """Findings of profile traces — one, or every rank's of one window — analysed as one set in a
    child process, with ``context`` (the job's live facts the traces cannot show); (findings,
    one-line note, the analyze report or None)."""
    report, why = analyze_profile_traces(paths, catalog, options, context=context)
    what = f"the profile trace {paths[0]}" if len(paths) == 1 else f"the profile traces of {len(paths)} ranks"
    if report is None:
        return [], f"could not analyse {what}: {why}", None
    found = f"{len(report.findings)} finding" + ("" if len(report.findings) == 1 else "s")
    listed = "" if len(paths) == 1 else ": " + ", ".join(paths)   # one path is named in ``what`` already
    return list(report.findings), f"{what} analysed ({found}){listed}", report


def analyze_trace(path: str, catalog: Catalog, options: Mapping[str, Mapping[str, Any]]
                  ) -> tuple[list[Finding], str | None]:
    """Findings of one profiler trace; (findings, note)."""
    findings, note, _ = analyze_trace_set([path], catalog, options)
    return findings, note


__all__ = ["AgentState", "LiveSession", "analyze_trace", "analyze_trace_set"]
