"""The straggler score and its likely cause, once, for the live side and the trace side (GD601).

Why this exists: a slow rank is named live, from each rank's agent (``live/stragglers.py``), and
post-hoc, from one profiler trace per rank (``trace/facts.py``). Both must judge it the same way, so
the score (NVIDIA resiliency-ext's: median over the faster half of the ranks of their time outside
collective waits per step ÷ this rank's own) and the cause (``input`` / ``gpu`` / ``cpu`` /
``compute``, from the slow rank's own evidence against the faster ranks') are computed here and
nowhere else. Each side brings the evidence it has: the live side a rank's data wait, its GPU's
clock-event reasons and its CPU run-queue delay; the trace side its DataLoader time, ``aten::`` ops
and GPU busy time per step.

Thresholds are GD601's options and live only in its rule file (``rules/GD601-straggler-rank.md``);
:func:`thresholds` reads them from there, merged with the user's overrides — no default is repeated
in code.

Pure logic: no I/O beyond reading the rule file once, no clocks, no torch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from gpudoctor.quantiles import median

#: Causes, in the order they are tried.
CAUSES = ("input", "gpu", "cpu", "compute")
RULE_FILE = "GD601-straggler-rank.md"


class StragglerThresholds(msgspec.Struct, frozen=True):
    """GD601's options that the straggler logic itself uses (names as in the rule file)."""

    min_straggler_score: float
    min_slow_windows: int
    min_window_steps: int
    min_excess_ms: float
    min_peer_wait_pct: float
    min_wait_ratio: float
    min_input_share: float
    cpu_delay_pct: float
    same_work_ratio: float
    slow_gpu_ratio: float


@functools.lru_cache(maxsize=1)
def _rule_options() -> dict[str, Any]:
    from gpudoctor.catalog.catalog import builtin_rules_dir
    from gpudoctor.catalog.rulefile import load_rule_file

    return dict(load_rule_file(builtin_rules_dir() / RULE_FILE).options)


def thresholds(overrides: Mapping[str, Any] | None = None) -> StragglerThresholds:
    """GD601's thresholds: the rule file's options, then the user's ``overrides`` on top.

    Raises:
        KeyError: the rule file lacks one of the options (a broken install, not a user error).
    """
    merged = {**_rule_options(), **dict(overrides or {})}
    values: dict[str, Any] = {}
    for name, kind in StragglerThresholds.__annotations__.items():  # "int" or "float" (postponed annotations)
        if name not in merged:
            raise KeyError(f"{RULE_FILE} has no option {name!r}")
        values[name] = int(merged[name]) if kind == "int" else float(merged[name])
    return StragglerThresholds(**values)


def faster_half_reference(own_ms: Sequence[float]) -> float:
    """Median of the faster half of the ranks (at least one): one slow rank among two cannot drag
    the reference towards itself."""
    ordered = sorted(own_ms)
    return float(median(ordered[: max(1, len(ordered) // 2)]))


def score(reference_ms: float, own_ms: float) -> float:
    """reference ÷ own; 1.0 for a rank with no time of its own (nothing to compare)."""
    return reference_ms / own_ms if own_ms > 0 else 1.0


class RankEvidence(msgspec.Struct, frozen=True):
    """What one rank did per step, as far as the side that judges it knows (``None``: not measured).

    Attributes:
        outside_ms: Time outside collective waits.
        input_ms: Time waiting for input (data wait + H2D live; DataLoader time in a trace).
        gpu_throttled: A hardware/thermal clock-event reason is active on its GPU (live).
        gpu_shared: Another job's process uses its GPU (live).
        cpu_run_delay_pct: Share of its main thread's runnable time spent waiting for a CPU (live).
        aten_ops: Host ``aten::`` ops per step (trace).
        gpu_busy_ms: GPU time per step outside communication kernels (trace).
        from_trace: Judged post-hoc, from a trace (the wording of the evidence differs).
    """

    outside_ms: float
    input_ms: float | None = None
    gpu_throttled: bool | None = None
    gpu_shared: bool | None = None
    cpu_run_delay_pct: float | None = None
    aten_ops: float | None = None
    gpu_busy_ms: float | None = None
    from_trace: bool = False


def _med(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(median(known)) if known else None


def likely_cause(slow: RankEvidence, fast: Sequence[RankEvidence], reference_ms: float,
                 limits: StragglerThresholds) -> tuple[str, str]:
    """(cause, one line of evidence) for a slow rank, from its own numbers against the faster ranks'.

    ``input`` when its extra input time explains at least ``min_input_share`` of its extra time over
    ``reference_ms`` (the score's reference). ``gpu`` when its GPU is throttled or shared and the
    faster ranks' are not (at full load every H100/H200 sits at its power cap, the fast ones too).
    ``cpu`` when its extra wait for a CPU (time outside collectives × its run-queue share beyond the
    faster ranks' share) explains that share too, or — in a trace, which has no run delay — when it ran the same
    work (within ``same_work_ratio`` of their ``aten::`` ops) and its GPU was not busier (under
    ``slow_gpu_ratio`` × theirs). Otherwise ``compute``: it does more work.
    """
    own = slow.outside_ms
    excess = max(own - reference_ms, 1e-9)
    ref_input = _med([f.input_ms for f in fast])
    if slow.from_trace:
        if slow.input_ms is not None and ref_input is not None and \
                slow.input_ms - ref_input >= limits.min_input_share * excess:
            return "input", f"its DataLoader takes {slow.input_ms:.1f} ms/step vs {ref_input:.1f} ms on the faster ranks"
        return _trace_work_cause(slow, fast, excess, limits)
    ref_input = _med([f.input_ms or 0.0 for f in fast]) or 0.0
    if slow.input_ms is not None and slow.input_ms - ref_input >= limits.min_input_share * excess:
        return "input", (f"it waits {slow.input_ms:.1f} ms/step for data (and H2D copies) vs {ref_input:.1f} ms "
                         f"on the fast ranks")
    throttled = slow.gpu_throttled and not any(f.gpu_throttled for f in fast)
    shared = slow.gpu_shared and not any(f.gpu_shared for f in fast)
    if throttled or shared:
        what = "its GPU is throttled (the fast ranks' are not)" if throttled else "another process shares its GPU"
        return "gpu", f"{what}; {excess:.1f} ms/step extra outside collectives"
    share = slow.cpu_run_delay_pct
    ref_share = _med([f.cpu_run_delay_pct or 0.0 for f in fast]) or 0.0
    # Its wait for a CPU beyond the fast ranks' share of the same: under contention that hits every
    # rank alike (a busy machine) the shares are equal and the extra work is the slow rank's own.
    extra_wait_ms = own * ((share or 0.0) - ref_share) / 100.0
    if share is not None and share >= limits.cpu_delay_pct and extra_wait_ms >= limits.min_input_share * excess:
        return "cpu", (f"its main thread spent {share:.0f}% of its runnable time waiting for a CPU vs "
                       f"{ref_share:.0f}% on the fast ranks (~{extra_wait_ms:.1f} ms/step more)")
    own_compute = own - (slow.input_ms or 0.0)
    ref_compute = reference_ms - ref_input
    return "compute", (f"it computes {own_compute:.1f} ms/step vs {ref_compute:.1f} ms on the fast ranks "
                       f"with about the same data wait")


def _trace_work_cause(slow: RankEvidence, fast: Sequence[RankEvidence], excess: float,
                      limits: StragglerThresholds) -> tuple[str, str]:
    ref_input, ref_ops, ref_gpu = (_med([f.input_ms for f in fast]), _med([f.aten_ops for f in fast]),
                                   _med([f.gpu_busy_ms for f in fast]))
    loader = ""
    if slow.input_ms is not None and ref_input is not None:
        loader = f" with about the same DataLoader time ({slow.input_ms:.1f} vs {ref_input:.1f} ms/step)"
    ops = f" ({slow.aten_ops:.0f} vs {ref_ops:.0f} aten ops per step)" if slow.aten_ops and ref_ops else ""
    same_ops = bool(slow.aten_ops and ref_ops and slow.aten_ops <= limits.same_work_ratio * ref_ops)
    gpu_busier = bool(slow.gpu_busy_ms and ref_gpu and slow.gpu_busy_ms >= limits.slow_gpu_ratio * ref_gpu)
    if same_ops and not gpu_busier:
        return "cpu", (f"it runs the same work as the faster ranks{ops}, {excess:.1f} ms/step slower on the host"
                       f"{loader}: starved of CPU (more busy processes than cores) or larger inputs per op")
    if same_ops:
        return "compute", (f"it runs the same ops as the faster ranks{ops} but its GPU is busy {slow.gpu_busy_ms:.1f} "
                           f"ms/step vs {ref_gpu:.1f} ms: more data per op (uneven batches or sequence lengths) or a "
                           f"throttled, shared or slower GPU")
    return "compute", f"{excess:.1f} ms/step more work outside collectives than the faster ranks{ops}{loader}"
