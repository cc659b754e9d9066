"""What a finding costs the step and what its fix gains: the impact model of a rule, and its verdict.

Why this exists: a finding is worth what it costs the step. Each rule file may declare an
``[impact]`` table (and a ``[when.impact]`` per block) with three expressions in the condition
language — ``cost_ms`` (what the problem costs per step now), ``saved_ms_low`` and ``saved_ms_high``
(the ms per step its fix removes, before the bottleneck bound) — a ``side`` and a ``basis`` sentence.
This module bounds the saving by what else limits the step:

- ``side = "gpu"`` (the fix shortens GPU work: precision, fusion, layout): the step cannot get
  shorter than ``host_floor_ms``, the time the host needs when it never waits for the GPU;
- ``side = "host"`` (the fix shortens work the GPU waits for: input, launches, syncs): the step
  cannot get shorter than ``gpu_busy_ms_per_step``.

A fix that also shortens the other side (``torch.compile`` launches fewer kernels, so the host's
floor falls too) declares ``floor_ms``: an expression for the floor after the fix, used in place of
the fact above.

A faster kernel class therefore helps only as much as the GPU bounds the step, and removing host
overhead only as much as the GPU waits for the host. Severity then follows the estimate (options
``impact_critical_speedup``, ``impact_warning_speedup``, ``impact_min_cost_pct`` in the rule's
``[options]``; defaults in :data:`DEFAULT_OPTIONS`).

What it must not do: know any rule's facts; read files; import anything heavy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from gpudoctor.catalog.expr import MISSING, Condition, ExpressionError, Template
from gpudoctor.catalog.registry import REGISTRY
from gpudoctor.model import Impact, Severity

SIDES = ("gpu", "host", "none")

#: Severity thresholds on the estimated speedup (geometric mean of low and high), and the cost floor.
DEFAULT_OPTIONS: dict[str, float] = {
    "impact_critical_speedup": 1.5,
    "impact_warning_speedup": 1.1,
    "impact_min_cost_pct": 2.0,
}

#: Facts every scope that carries an impact has (the bottleneck's numbers); the step time may also come
#: as a straggler's or a rank's own name for it.
STEP = "step_time_ms"
STEP_FALLBACKS = ("step_time_p50_ms", "rank_step_time_ms")
GPU_BUSY = "gpu_busy_ms_per_step"
HOST_FLOOR = "host_floor_ms"
PROFILED_STEP = "profiled_step_ms"


class ImpactModel(msgspec.Struct, frozen=True):
    """A rule's declared estimate: expressions over facts, and the side of the step the fix shortens."""

    side: str
    cost_ms: Condition | None = None
    saved_ms_low: Condition | None = None
    saved_ms_high: Condition | None = None
    basis: Template | None = None
    why_none: str = ""
    floor_ms: Condition | None = None    # the floor after the fix, when the fix moves it too

    @property
    def names(self) -> list[str]:
        out: list[str] = []
        for expr in (self.cost_ms, self.saved_ms_low, self.saved_ms_high, self.floor_ms):
            if expr is not None:
                out.extend(expr.names)
        if self.basis is not None:
            out.extend(self.basis.names)
        return list(dict.fromkeys(out))


def parse_impact(raw: Mapping[str, Any]) -> ImpactModel:
    """Parse an ``[impact]`` table. Raises ``ValueError`` (the loader names the file)."""
    unknown = set(raw) - {"side", "cost_ms", "saved_ms_low", "saved_ms_high", "basis", "why_none", "floor_ms"}
    if unknown:
        raise ValueError(f"[impact] has unknown keys: {', '.join(sorted(unknown))}")
    side = str(raw.get("side", ""))
    if side not in SIDES:
        raise ValueError(f"[impact] side must be one of {', '.join(SIDES)}, not {side!r}")
    if side == "none":
        if not raw.get("why_none"):
            raise ValueError("[impact] side = \"none\" needs why_none: one sentence on why there is no estimate")
        return ImpactModel(side, why_none=str(raw["why_none"]))
    missing = [k for k in ("cost_ms", "saved_ms_low", "saved_ms_high", "basis") if not raw.get(k)]
    if missing:
        raise ValueError(f"[impact] needs {', '.join(missing)}")
    floor = Condition(str(raw["floor_ms"])) if raw.get("floor_ms") else None
    return ImpactModel(side, Condition(str(raw["cost_ms"])), Condition(str(raw["saved_ms_low"])),
                       Condition(str(raw["saved_ms_high"])), Template(str(raw["basis"])), floor_ms=floor)


class Verdict(msgspec.Struct, frozen=True):
    """The outcome of a model on one fact set: an impact, or a note saying why there is none."""

    impact: Impact | None
    note: str = ""


def estimate(model: ImpactModel | None, env: Mapping[str, Any]) -> Verdict:
    """Evaluate ``model`` on a fact set's environment (facts + options)."""
    if model is None:
        return Verdict(None, "this rule has no impact model")
    if model.side == "none":
        return Verdict(None, model.why_none)
    assert model.cost_ms and model.saved_ms_low and model.saved_ms_high and model.basis
    step = next((v for v in (_number(env.get(n)) for n in (STEP, *STEP_FALLBACKS)) if v is not None), None)
    if step is None or step <= 0:
        return Verdict(None, "needs a step time (from the agent, or a trace with ProfilerStep#N)")
    try:
        cost = _number(model.cost_ms.evaluate(env))
        low = _number(model.saved_ms_low.evaluate(env))
        high = _number(model.saved_ms_high.evaluate(env))
        moved_floor = _number(model.floor_ms.evaluate(env)) if model.floor_ms is not None else None
    except ExpressionError as exc:
        return Verdict(None, f"the estimate could not be computed ({exc})")
    if low is None or high is None:
        absent = [n for n in model.names if env.get(n) is None]
        return Verdict(None, f"needs {described(absent) or 'measurements this run lacks'}")
    low, high = sorted((max(0.0, low), max(0.0, high)))
    floor_name = HOST_FLOOR if model.side == "gpu" else GPU_BUSY
    floor = moved_floor if moved_floor is not None else _number(env.get(floor_name))
    bound = "" if floor is None else _bound_text(model.side, floor, moved=moved_floor is not None)
    floor = min(max(floor, 0.0), step) if floor is not None else 0.0
    speed_low = step / max(step - low, floor, 1e-9)
    speed_high = step / max(step - high, floor, 1e-9)
    try:
        basis = model.basis.render(env) + bound
    except ExpressionError as exc:
        basis = f"(basis could not be rendered: {exc})"
    # the share is of the step the report's verdict divides (the profiled step, when a trace has one), so
    # that one time never reads as two percentages in one report
    base = _number(env.get(PROFILED_STEP)) or step
    cost_pct = 100.0 * cost / base if cost is not None else None
    return Verdict(Impact(
        cost_ms_per_step=round(cost, 3) if cost is not None else None,
        cost_pct_of_step=round(cost_pct, 1) if cost_pct is not None else None,
        est_speedup_low=round(speed_low, 3),
        est_speedup_high=round(speed_high, 3),
        basis=basis,
        side=model.side,
    ))


def _bound_text(side: str, floor: float, moved: bool = False) -> str:
    if side == "gpu":
        if moved:
            return f"; bounded by the host's floor after the fix, {floor:.1f} ms/step"
        return f"; bounded by the host's floor of {floor:.1f} ms/step"
    if moved:
        return f"; bounded by {floor:.1f} ms/step after the fix"
    return f"; bounded by the GPU's busy time of {floor:.1f} ms/step"


def severity_from(impact: Impact, options: Mapping[str, Any]) -> Severity:
    """Severity from the estimated gain; below the cost floor a finding never warns."""
    opts = {**DEFAULT_OPTIONS, **{k: v for k, v in options.items() if k in DEFAULT_OPTIONS}}
    if impact.cost_pct_of_step is not None and impact.cost_pct_of_step < float(opts["impact_min_cost_pct"]):
        return Severity.INFO
    gain = impact.est_speedup
    if gain >= float(opts["impact_critical_speedup"]):
        return Severity.CRITICAL
    if gain >= float(opts["impact_warning_speedup"]):
        return Severity.WARNING
    return Severity.INFO


def described(names: list[str]) -> str:
    """Fact names in words, for a reader: ``GPU idle per step while the host loads the next batch; …``
    (each fact's registry doc up to its first comma, colon or semicolon, without its parentheses; the
    name where none is declared)."""
    words: list[str] = []
    for name in names:
        doc = next((spec.doc for spec in REGISTRY if spec.name == name), "")
        short = re.split(r"[,:;]", re.sub(r"\s*\([^)]*\)", "", doc), maxsplit=1)[0].strip() if doc else name
        if short and short not in words:
            words.append(short)
    return "; ".join(words)


_FACT_NAME = re.compile(r"[a-z][a-z0-9_]*")


def needs_in_words(needs: str) -> str:
    """A not-evaluated entry's ``needs`` (``a, b; c``: per condition, the facts it lacked, or the words
    its rule file wrote) for a reader: fact names in their registry words, each phrase once."""
    phrases: list[str] = []
    for part in needs.split(";"):
        names = [n.strip() for n in part.split(",")]
        if names and all(_FACT_NAME.fullmatch(n) for n in names):
            words = [w for w in described(names).split("; ") if w]
        else:
            words = [part.strip()]
        phrases.extend(w for w in words if w and w not in phrases)
    return "; ".join(phrases)


def _number(value: Any) -> float | None:
    if value is MISSING or value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    return None
