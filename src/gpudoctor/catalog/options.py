"""Rule options, resolved once: each rule's ``[options]`` with the user's overrides on top, validated.

Every consumer — the engine's conditions and estimates, the straggler scoring of ``analyze`` and
``attach``, the input gate of :mod:`gpudoctor.catalog.finalize` — reads the same resolved values, so a
``[tool.gpudoctor.options.GD601]`` override moves the slow-rank cause in a trace as it does live, and a
GD102 override moves the gate. The user names a rule by code or name; an unknown rule, an option the
rule does not have, or a value of another type than the rule's default is a usage error naming it
(exit 2) — an override that silently does nothing is worse than none.

What it must not do: read files or evaluate rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gpudoctor.catalog.impact import DEFAULT_OPTIONS
from gpudoctor.catalog.rulefile import Rule
from gpudoctor.exitcodes import ExitCode, UserError


def resolve_options(rules: Iterable[Rule], overrides: Mapping[str, Mapping[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """Each rule's options — defaults, its file's, then ``overrides`` (keyed by rule code or name) — by rule code.

    Args:
        rules: Every loaded rule (before ``select``/``ignore``: an option for a rule left out of this run
            is still a known option).
        overrides: The user's ``[tool.gpudoctor.options.<code or name>]`` tables.

    Raises:
        UserError: (exit 2) naming an unknown rule, an option the rule lacks, or a value of the wrong type.
    """
    by_key: dict[str, Rule] = {}
    for rule in rules:
        by_key[rule.code.upper()] = rule
        by_key[rule.name] = rule
    resolved = {rule.code: {**DEFAULT_OPTIONS, **rule.options} for rule in by_key.values()}
    for key, values in (overrides or {}).items():
        found = by_key.get(key) or by_key.get(key.upper())
        if found is None:
            raise UserError(f"options for {key[:60]!r}: no rule has that code or name (`gpudoctor rules` lists them).",
                            ExitCode.USAGE)
        rule = found
        known = {**DEFAULT_OPTIONS, **rule.options}
        for name, value in values.items():
            if name not in known:
                names = ", ".join(sorted(rule.options)) or "none of its own"
                raise UserError(f"options for {rule.code}: it has no option {str(name)[:60]!r} (its options: {names}; "
                                f"every rule also takes {', '.join(sorted(DEFAULT_OPTIONS))}).", ExitCode.USAGE)
            if not _same_kind(known[name], value):
                raise UserError(f"options for {rule.code}: {name} must be {_kind(known[name])} like its default "
                                f"{known[name]!r}, not {value!r}.", ExitCode.USAGE)
            resolved[rule.code][name] = value
    return resolved


def _same_kind(default: Any, value: Any) -> bool:
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(default, bool) and isinstance(value, bool)
    if isinstance(default, (int, float)):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def _kind(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, (int, float)):
        return "a number"
    return "a string"
