"""Every rule's message reads as a sentence after its title, and names no severity.

A card reads ``<Title>. <message>``: a message that starts lowercase is a sentence without its
capital (the report showed "…input pipeline. the training loop waits…"). The severity a card shows
is decided after the message is written — by the estimate of its fix and the step's verdict — so a
message that names one ("critical above 60%") contradicts an info card; a message names the
threshold instead. Static (``check``) messages are compiler-style lines (``path:1:1: GD801 …``) and
keep their lowercase start.
"""

from __future__ import annotations

import re

import pytest

from gpudoctor.catalog.catalog import load_catalog
from gpudoctor.model import Source

#: A message may start with a value, a path, code or an identifier (``torch.compile``, ``optimizer.step``).
_STARTS_AS_CODE = re.compile(r"^([`{/0-9]|[A-Za-z_]+[._][A-Za-z_])")
_SEVERITY_WORDS = re.compile(r"\b(critical|warning|info)\b", re.I)

_CARDS = [(code, when.id, when) for code, rule in sorted(load_catalog().rules.items())
          for when in rule.whens if when.source is not Source.STATIC]


@pytest.mark.parametrize(("code", "block", "when"), _CARDS, ids=[f"{c}-{b}" for c, b, _ in _CARDS])
def test_message_starts_a_sentence_and_names_no_severity(code: str, block: str, when: object) -> None:
    text = when.message.text  # type: ignore[attr-defined]
    assert _STARTS_AS_CODE.match(text) or text[:1].isupper(), f"{code} block {block}: {text[:60]!r}"
    assert not _SEVERITY_WORDS.search(text), f"{code} block {block} names a severity: {text!r}"


def test_the_check_fails_on_what_it_must_catch() -> None:
    assert not ("the training loop waits"[:1].isupper() or _STARTS_AS_CODE.match("the training loop waits"))
    assert _SEVERITY_WORDS.search("GPU idle 88% (critical above 60%)")
    assert _STARTS_AS_CODE.match("torch.compile broke the graph") and _STARTS_AS_CODE.match("{n} copies")
