"""Every ``[[when]]`` block has a stable id, and the parser refuses a block it cannot name or read.

Recorded rule cases (tests/data/rule_cases) are keyed by the id, and a live or trace block with no
recorded case says why in its own ``no_case``; a block inserted anywhere moves nothing. Each refusal
is one sentence that names the file and the block.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.catalog.rulefile import NAME_RE, RuleFileError, parse_rule_text

_HEAD = '''+++
code = "GD990"
name = "too-many-kernels"
title = "Too many kernels"
[options]
max_kernels = 3
'''
_TAIL = '''+++
## What it detects
Kernels.
'''
_TRACE = '''[[when]]
id = "trace-kernels"
source = "trace"
scope = "rank"
condition = "kernels_per_step > max_kernels"
message = "{kernels_per_step} kernels per step on rank {rank}"
'''
_STATIC = '''[[when]]
id = "static-loop"
source = "static"
scope = "python.training_loop"
condition = "gpu_job"
message = "a CUDA training loop"
'''


def _rule(*blocks: str) -> str:
    return _HEAD + "\n".join(blocks) + _TAIL


def _refused(text: str) -> str:
    with pytest.raises(RuleFileError) as caught:
        parse_rule_text(text, "rules/GD990-too-many-kernels.md")
    message = str(caught.value)
    assert message.startswith("rules/GD990-too-many-kernels.md: [[when]] block "), message
    assert "\n" not in message
    return message


def test_blocks_carry_their_id_and_no_case_reason() -> None:
    reason = "no recorded trace launches that many kernels; needs a profile of a model with many small layers"
    rule = parse_rule_text(_rule(_STATIC, _TRACE.replace('source = "trace"', f'no_case = "{reason}"\nsource = "trace"')))
    assert [(w.id, w.no_case) for w in rule.whens] == [("static-loop", ""), ("trace-kernels", reason)]


def test_a_block_without_an_id_is_refused_by_its_place() -> None:
    message = _refused(_rule(_STATIC, _TRACE.replace('id = "trace-kernels"\n', "")))
    assert "block 2 of 2 has no id" in message and 'id = "..."' in message


@pytest.mark.parametrize("ident", ['"Trace_Kernels"', '"trace kernels"', '"-trace"', '"trace--kernels"', "3", '""'])
def test_an_id_that_is_not_kebab_case_is_refused(ident: str) -> None:
    message = _refused(_rule(_TRACE.replace('"trace-kernels"', ident)))
    assert "block 1 of 1 has id = " in message and "not kebab-case" in message


def test_a_duplicate_id_within_a_rule_is_refused() -> None:
    message = _refused(_rule(_TRACE, _STATIC.replace('"static-loop"', '"trace-kernels"')))
    assert 'block 2 of 2 has id "trace-kernels", which block 1 already has' in message


def test_the_same_id_in_two_rules_is_fine() -> None:
    one = parse_rule_text(_rule(_TRACE))
    two = parse_rule_text(_rule(_TRACE).replace("GD990", "GD991").replace("too-many-kernels", "many-kernels"))
    assert one.whens[0].id == two.whens[0].id


def test_an_unknown_key_in_a_block_is_refused() -> None:
    # a misspelt severity used to be dropped: the block fired at the rule's severity
    message = _refused(_rule(_TRACE.replace('message =', 'sevrity = "info"\nmessage =')))
    assert 'block "trace-kernels" has unknown key(s) sevrity: a block takes id, source' in message


@pytest.mark.parametrize(("block", "source"), [(_STATIC, "static"), (
    _TRACE.replace('source = "trace"\nscope = "rank"', 'source = "env"\nscope = "machine"')
    .replace("kernels_per_step > max_kernels", "shm_size_mib < 64").replace(" on rank {rank}", ""), "env")])
def test_no_case_on_a_block_without_recorded_cases_is_refused(block: str, source: str) -> None:
    message = _refused(_rule(block.replace("condition =", 'no_case = "never recorded"\ncondition =')))
    assert f"is a {source} block with no_case, which only live and trace blocks take" in message


@pytest.mark.parametrize("value", ['""', '"  "', "true"])
def test_no_case_must_be_a_reason(value: str) -> None:
    message = _refused(_rule(_TRACE.replace("condition =", f"no_case = {value}\ncondition =")))
    assert 'block "trace-kernels" has no_case = ' in message and "it takes a reason" in message


def test_a_user_rule_directory_with_an_id_less_block_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "GD990-too-many-kernels.md"
    path.write_text(_rule(_TRACE.replace('id = "trace-kernels"\n', "")))
    with pytest.raises(RuleFileError, match=re.escape(f"{path}: [[when]] block 1 of 1 has no id")):
        load_catalog([tmp_path])


def test_every_built_in_block_has_an_id_saying_its_source() -> None:
    """The built-in ids start with their block's source (``trace-``, ``live-``, ``static-``, ``env-``)."""
    wrong = [f"{r.code}[{w.id}]" for r in load_catalog() for w in r.whens
             if not (NAME_RE.match(w.id) and w.id.startswith(f"{w.source.value}-"))]
    assert not wrong, f"built-in block ids that do not start with their source: {', '.join(wrong)}"
