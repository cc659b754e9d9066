"""Every hostile case of tests/fuzz/corpus/agent/wire.toml against one live agent (see agent_wire.py):
each gets the answer its case expects, and after each a new client is served by the same agent with no
profile window left armed. Before the fix the first case (a 4 KB line of ``[``) ended the agent's
server thread and removed its socket, and every later case was refused."""

from __future__ import annotations

import pytest
from agent_wire import WireOutcome, load_wire_cases, run_all

CASES = load_wire_cases()


@pytest.fixture(scope="module")
def outcomes() -> dict[str, WireOutcome]:
    return {o.case.name: o for o in run_all(CASES)}


def test_the_corpus_has_each_hostile_kind() -> None:
    assert {c.expect for c in CASES} == {"error-closed", "error", "closed", "served"}


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_agent_survives(case: object, outcomes: dict[str, WireOutcome]) -> None:
    outcome = outcomes[case.name]  # type: ignore[attr-defined]
    assert outcome.served_after, f"{outcome.case.what}: the agent no longer serves a new client ({outcome.detail})"
    assert outcome.got == outcome.case.expect, f"{outcome.case.what}: {outcome.got} ({outcome.reply})"
    if outcome.reply != "(no reply)":
        assert outcome.reply.endswith(".") and "\n" not in outcome.reply and len(outcome.reply) < 200
