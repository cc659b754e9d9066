"""Meta-tests over the whole rule catalog: every rule is complete, loadable and documented."""

from __future__ import annotations

import re

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.catalog import builtin_rules_dir
from gpudoctor.catalog.rulefile import HEADINGS, load_rule_file

RULE_FILES = sorted(builtin_rules_dir().glob("GD*.md"))


def test_catalog_loads_and_is_not_empty() -> None:
    catalog = load_catalog()
    assert len(catalog) == len(RULE_FILES) >= 1


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_rule_file_is_complete(path) -> None:
    rule = load_rule_file(path)
    assert path.name == f"{rule.code}-{rule.name}.md", "file name must be CODE-name.md"
    for heading in HEADINGS:
        assert rule.sections.get(heading, "").strip(), f"{path.name}: '## {heading}' is missing or empty"
    assert list(rule.sections)[: len(HEADINGS)] == list(HEADINGS), f"{path.name}: headings out of order"
    assert rule.fix.summary, f"{path.name}: the Fix section needs a summary sentence"
    assert rule.fix.before and rule.fix.after, f"{path.name}: the Fix needs a before and an after snippet"
    assert rule.fix.before != rule.fix.after
    for option in rule.options:
        assert f"`{option}`" in rule.sections["Options"], f"{path.name}: option {option} is not documented"
    for when in rule.whens:
        for name in when.message.names:
            assert re.match(r"^[a-z_][a-z0-9_]*$", name)


def test_codes_and_names_are_unique() -> None:
    rules = [load_rule_file(p) for p in RULE_FILES]
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)


def test_names_name_the_problem_not_the_fix() -> None:
    for path in RULE_FILES:
        rule = load_rule_file(path)
        assert not rule.name.startswith(("use-", "increase-", "enable-", "add-", "set-")), rule.name
