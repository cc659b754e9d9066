"""Reads one side of a comparison: a recording, a gpudoctor JSON report, or a set of traces.

Why this exists: ``compare`` takes "before" and "after" in whatever form the user has — a live
recording (docs/recording-format.md), the JSON of ``gpudoctor analyze``, or the raw Kineto traces
themselves (analysed here through :func:`gpudoctor.commands.analyze.analyze_paths`) — and turns
each into the same :class:`Side`: step-time samples and finding identities.

What it must not do: parse Kineto traces itself (the trace package owns that), import torch, or
raise anything but :class:`UserError` for a bad input.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudoctor.exitcodes import ExitCode, UserError

#: Keys under which per-rank step-duration lists (milliseconds) may appear in a ``ranks`` row.
STEP_LIST_KEYS = ("step_ms", "step_times_ms", "step_durations_ms")


@dataclass(frozen=True)
class FindingKey:
    """What makes two findings "the same problem" across runs: rule and where (rank/path)."""

    code: str
    name: str
    where: str
    severity: str
    title: str
    est_speedup_low: float | None = None    # the finding's estimate on this side, when it had one
    est_speedup_high: float | None = None

    @property
    def gain(self) -> float:
        """Middle of the estimate (1.0 without one): what ``compare`` orders findings by."""
        if self.est_speedup_low is None or self.est_speedup_high is None:
            return 1.0
        return float((self.est_speedup_low * self.est_speedup_high) ** 0.5)


@dataclass
class Side:
    """One side of the comparison, reduced to what ``compare`` needs.

    Attributes:
        label: How the user named it (the path).
        kind: ``recording`` | ``report`` | ``traces``.
        step_ms: The job's step times (slowest rank per step when ranks align).
        per_rank_step_ms: Step times by rank, as read.
        samples_per_step: Batch size when the input says so (for samples/s).
        findings: The findings of this side.
        step_source: Where step times came from (agent, trace, …) or None.
    """

    label: str
    kind: str
    step_ms: list[float]
    per_rank_step_ms: dict[int, list[float]] = field(default_factory=dict)
    samples_per_step: float | None = None
    findings: list[FindingKey] = field(default_factory=list)
    step_source: str | None = None
    notes: list[str] = field(default_factory=list)


AnalyzeFn = Callable[[Sequence[Path]], Mapping[str, Any]]


def _is_gpudoctor_json(path: Path) -> bool:
    """A gpudoctor JSON starts with its ``"gpudoctor"`` version key; a Kineto trace does not."""
    if path.suffix == ".gz" or not path.is_file():
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(512)
    except OSError:
        return False
    return b'"gpudoctor"' in head


def _read_json(path: Path) -> dict[str, Any]:
    try:
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}.", ExitCode.USAGE) from None
    except (json.JSONDecodeError, UnicodeDecodeError, EOFError) as exc:
        raise UserError(f"{path} is not valid JSON ({exc}); pass a gpudoctor recording, a report "
                        f"or trace files.", ExitCode.USAGE) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is JSON but not a gpudoctor report or recording.", ExitCode.USAGE)
    return data


def _floats(values: Any) -> list[float] | None:
    if not isinstance(values, list) or not values:
        return None
    out: list[float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v <= 0:
            return None
        out.append(float(v))
    return out


def _step_lists(data: Mapping[str, Any]) -> tuple[dict[int, list[float]], str | None, float | None]:
    """Per-rank step times from a ``steps`` section or from ``ranks`` rows (see recording-format.md)."""
    steps = data.get("steps")
    per_rank: dict[int, list[float]] = {}
    source: str | None = None
    samples_per_step: float | None = None
    if isinstance(steps, dict):
        source = steps.get("source") if isinstance(steps.get("source"), str) else None
        sps = steps.get("samples_per_step")
        samples_per_step = float(sps) if isinstance(sps, (int, float)) and not isinstance(sps, bool) and sps > 0 \
            else None
        flat = _floats(steps.get("step_ms"))
        if flat:
            per_rank[0] = flat
        for i, row in enumerate(steps.get("ranks") or []):
            if isinstance(row, dict):
                values = _floats(row.get("step_ms"))
                rank = row.get("rank", i)
                if values and isinstance(rank, int):
                    per_rank[rank] = values
    if not per_rank:
        per_rank = _steps_table(data)
        if per_rank:
            source = source or "trace"
    if not per_rank and isinstance(steps, dict):
        p50 = steps.get("step_time_p50_ms")
        if isinstance(p50, (int, float)) and not isinstance(p50, bool) and p50 > 0:
            per_rank[0] = [float(p50)]  # a summary without samples: a median, no noise estimate
            source = "summary"
    if not per_rank and isinstance(data.get("ranks"), list):
        for i, row in enumerate(data["ranks"]):
            if not isinstance(row, dict):
                continue
            for key in STEP_LIST_KEYS:
                values = _floats(row.get(key))
                if values:
                    rank = row.get("rank", i)
                    per_rank[rank if isinstance(rank, int) else i] = values
                    source = source or "trace-host"
                    break
    return per_rank, source, samples_per_step


def _steps_table(data: Mapping[str, Any]) -> dict[int, list[float]]:
    """Per-rank effective step times from an analyze report's per-step table (``key: steps``).

    A traced step's host span (``step_time_ms``) understates a GPU-bound step: the CPU runs ahead and
    the GPU work it queued finishes later. A step can finish no faster than its host work or its GPU
    work, so the effective step time is ``max(step_time_ms, gpu_busy_ms)``. On the H200 ResNet traces
    this gives 46.2 ms (fp32) vs 23.1 ms (bf16) — the measured 21.3 vs 42.7 steps/s — where the host
    spans alone (21.8 vs 20.1 ms) would hide the 2x.
    """
    per_rank: dict[int, list[float]] = {}
    for table in data.get("tables") or []:
        if not isinstance(table, dict) or table.get("key") != "steps":
            continue
        for row in table.get("rows") or []:
            if not isinstance(row, dict):
                continue
            host = row.get("step_time_ms")
            gpu = row.get("gpu_busy_ms")
            values = [v for v in (host, gpu) if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0]
            if values:
                rank = row.get("rank", 0)
                per_rank.setdefault(rank if isinstance(rank, int) else 0, []).append(float(max(values)))
    return per_rank


def job_step_ms(per_rank: Mapping[int, Sequence[float]]) -> list[float]:
    """The job's step times: per step the slowest rank when ranks align, else all samples pooled."""
    lists = [list(v) for _, v in sorted(per_rank.items())]
    if not lists:
        return []
    if len(lists) == 1:
        return lists[0]
    if len({len(v) for v in lists}) == 1:
        return [max(values) for values in zip(*lists)]
    return [x for v in lists for x in v]


def _finding_keys(data: Mapping[str, Any]) -> list[FindingKey]:
    keys = []
    for f in data.get("findings") or []:
        if isinstance(f, dict) and isinstance(f.get("code"), str):
            impact = f.get("impact")
            impact = impact if isinstance(impact, dict) else {}
            low, high = impact.get("est_speedup_low"), impact.get("est_speedup_high")
            keys.append(FindingKey(code=f["code"], name=str(f.get("name", "")), where=str(f.get("where") or ""),
                                   severity=str(f.get("severity", "")), title=str(f.get("title", "")),
                                   est_speedup_low=float(low) if isinstance(low, (int, float)) else None,
                                   est_speedup_high=float(high) if isinstance(high, (int, float)) else None))
    keys.sort(key=lambda k: -k.gain)
    return keys


def side_from_dict(label: str, data: Mapping[str, Any], kind: str) -> Side:
    """Build a :class:`Side` from a parsed gpudoctor JSON object (recording or report)."""
    if "findings" not in data and "steps" not in data:
        raise UserError(f"{label} is JSON but not a gpudoctor report or recording (no 'findings' or "
                        f"'steps').", ExitCode.USAGE)
    per_rank, source, samples_per_step = _step_lists(data)
    notes = []
    if source == "summary":
        notes.append(f"{label}: the recording holds only a median step time, no step samples (see "
                     f"docs/recording-format.md): no noise estimate is possible.")
    if source == "trace-host":
        notes.append(f"{label}: step times are the traced host spans only; a GPU-bound step looks "
                     f"shorter than it is. Save analyze output with --per-step (GPU busy time per step).")
    return Side(label=label, kind=kind, step_ms=job_step_ms(per_rank), per_rank_step_ms=per_rank,
                samples_per_step=samples_per_step, findings=_finding_keys(data), step_source=source, notes=notes)


def _trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir()
                       if p.is_file() and (p.name.endswith(".json") or p.name.endswith(".json.gz"))
                       and not p.name.endswith(".result.json"))
        if not files:
            raise UserError(f"{path} holds no trace files (*.json, *.json.gz).", ExitCode.USAGE)
        return files
    return [path]


def load_side(spec: str, analyze: AnalyzeFn | None = None) -> Side:
    """Read one side. ``spec`` is a recording/report JSON, a trace file, a directory of traces, or
    several trace files joined by commas (one per rank).

    Args:
        spec: What the user passed on the command line.
        analyze: Turns trace files into a report dict (``analyze --format json`` shape); required
            only when ``spec`` names traces.
    """
    paths = [Path(p) for p in spec.split(",") if p]
    if not paths:
        raise UserError("an empty path was given to compare.", ExitCode.USAGE)
    for p in paths:
        if not p.exists():
            raise UserError(f"{p} does not exist.", ExitCode.USAGE)
    if len(paths) == 1 and _is_gpudoctor_json(paths[0]):
        data = _read_json(paths[0])
        kind = "recording" if isinstance(data.get("steps"), dict) and data.get("command") in ("attach", "run") \
            else "report"
        return side_from_dict(spec, data, kind)
    if analyze is None:
        raise UserError(f"{spec} looks like trace files, but trace analysis is not available in this "
                        f"install.", ExitCode.USAGE)
    files = [f for p in paths for f in _trace_files(p)]
    return side_from_dict(spec, analyze(files), "traces")
