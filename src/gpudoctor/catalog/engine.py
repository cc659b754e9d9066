"""Runs rules over fact sets: the single place where facts become findings.

For each rule and each of its ``[[when]]`` blocks whose source is being analysed, the engine
evaluates the condition on every fact set of the block's scope. A condition that cannot be decided
because a fact is missing yields :class:`NotEvaluated` ("needs X"), never a silent pass. Facts of the
``run`` scope (whole-job context such as ``world_size`` or ``device_name``) are visible to every
other scope of the same source as a fallback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from gpudoctor.catalog.catalog import Catalog
from gpudoctor.catalog.expr import MISSING, ExpressionError
from gpudoctor.catalog.impact import DEFAULT_OPTIONS, estimate, severity_from
from gpudoctor.catalog.rulefile import Rule, When
from gpudoctor.model import Evidence, FactSet, Finding, NotEvaluated, Source

RUN_SCOPE = "run"


class Evaluation(msgspec.Struct):
    findings: list[Finding] = msgspec.field(default_factory=list)
    not_evaluated: list[NotEvaluated] = msgspec.field(default_factory=list)
    errors: list[str] = msgspec.field(default_factory=list)


def evaluate(
    catalog: Catalog,
    factsets: Iterable[FactSet],
    sources: Iterable[Source],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Evaluation:
    """Judge every rule that can use one of ``sources`` against ``factsets``.

    Args:
        catalog: The rules.
        factsets: Evidence from one or more sources.
        sources: Which sources this run analysed; rules for other sources are skipped silently.
        options: Per-rule option overrides, keyed by rule code or name.
    """
    wanted = set(sources)
    by_key: dict[tuple[Source, str], list[FactSet]] = {}
    for fs in factsets:
        by_key.setdefault((fs.source, fs.scope), []).append(fs)
    out = Evaluation()
    bases: dict[tuple[Source, int], dict[str, Any]] = {}  # one fact set's names, built once for all rules
    for rule in catalog:
        rule_options = _options_for(rule, options or {})
        for source in rule.sources:
            if source not in wanted:
                continue
            _evaluate_source(rule, source, by_key, rule_options, out, bases)
    return out  # as judged: cross-finding policy (merging included) is catalog.finalize's


def _options_for(rule: Rule, overrides: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    merged = {**DEFAULT_OPTIONS, **rule.options}
    for key in (rule.code, rule.name):
        merged.update(overrides.get(key, {}))
    return merged


def _evaluate_source(
    rule: Rule,
    source: Source,
    by_key: Mapping[tuple[Source, str], list[FactSet]],
    options: dict[str, Any],
    out: Evaluation,
    bases: dict[tuple[Source, int], dict[str, Any]],
) -> None:
    whens = [w for w in rule.whens if w.source == source]
    context = {}
    for run_fs in by_key.get((source, RUN_SCOPE), []):
        context.update({k: v for k, v in run_fs.values.items() if v is not None})
    fired: set[int] = set()  # ids of fact sets already judged guilty by an earlier block
    missing: list[str] = []
    for when in whens:
        subjects = by_key.get((source, when.scope), [])
        if not subjects:
            if source in (Source.STATIC,):
                continue  # nothing of this kind in the files: nothing to judge
            missing.append(when.needs or f"{when.scope} facts from {source.value}")
            continue
        for fs in subjects:
            if id(fs) in fired:
                continue
            base = bases.get((source, id(fs)))
            if base is None:  # the same for every rule: built once per fact set (it was a third of judging)
                base = {**context, **{k: v for k, v in fs.values.items() if v is not None}, **_location_env(fs)}
                bases[(source, id(fs))] = base
            env = {**base, **options}
            try:
                verdict = when.condition.evaluate(env)
            except ExpressionError as exc:
                out.errors.append(f"{rule.code} ({rule.path}): {exc}")
                continue
            if verdict is MISSING:
                absent = [n for n in when.condition.names if env.get(n) is None]
                missing.append(", ".join(absent) or when.condition.text)
                continue
            if verdict:
                fired.add(id(fs))
                out.findings.append(_finding(rule, when, fs, env, options))
    if missing and not any(f.code == rule.code and f.source == source for f in out.findings):
        needs = "; ".join(dict.fromkeys(missing))
        out.not_evaluated.append(NotEvaluated(rule.code, rule.name, source, needs))


def _location_env(fs: FactSet) -> dict[str, Any]:
    return {k: v for k, v in fs.location.to_dict().items()}


def _finding(rule: Rule, when: When, fs: FactSet, env: dict[str, Any], options: dict[str, Any]) -> Finding:
    names = list(dict.fromkeys([*when.condition.names, *rule.evidence, *when.message.names]))
    evidence = []
    for name in names:
        if name in options:
            evidence.append(Evidence(name, options[name], is_threshold=True))
        elif env.get(name) is not None and name not in fs.location.to_dict():
            evidence.append(Evidence(name, env[name]))
    verdict = estimate(when.impact, env)
    severity = when.severity or rule.severity
    if verdict.impact is not None:
        severity = severity_from(verdict.impact, options)
    return Finding(
        code=rule.code,
        name=rule.name,
        severity=severity,
        title=rule.title,
        message=when.message.render(env),
        source=fs.source,
        evidence=tuple(evidence),
        fix=rule.fix,
        location=fs.location,
        timestamp=fs.timestamp,
        impact=verdict.impact,
        impact_note=verdict.note,
        overlaps=rule.overlaps,
        estimate_from=rule.estimate_from,
        cleared_by=rule.cleared_by,
        symptom=rule.symptom,
    )
