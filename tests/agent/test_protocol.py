"""The typed agent protocol: replies round-trip, unknown fields are reported, PROTOCOL.md matches,
and the agent package never imports the live side (nor anything beyond the standard library)."""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.agent import protocol
from gpudoctor.agent.protocol import (
    HelloReply,
    ProfileReply,
    ProfileState,
    StatsReply,
    StepSource,
    StepStats,
    WindowKind,
    from_wire,
    to_wire,
)

AGENT_DIR = Path(protocol.__file__).resolve().parent
#: Modules that run inside the target (bootstrap/inject import them there): stdlib + the target's torch only.
IN_TARGET = ["runtime", "hooks", "syncs", "profiling", "protocol", "server", "paths", "collectives"]


def test_stats_reply_round_trips_through_json_with_enums_and_tuples() -> None:
    stats = StepStats(timestamp=1.0, steps_total=9, window_steps=8, step_time_p50_ms=12.5,
                      graph_break_reasons=(("print at x.py:3", 2),), host_syncs_per_step=3.0,
                      step_source=StepSource.BACKWARD)
    reply = StatsReply(stats=stats, recent_step_times_ms=(12.0, 13.0), collective_timing="not DDP")
    wire = json.loads(json.dumps(to_wire(reply)))
    assert wire["ok"] is True and wire["step_source"] == "backward" and "stats" not in wire
    back = from_wire(StatsReply, wire)
    assert back == reply
    assert back.stats.step_source is StepSource.BACKWARD


def test_unknown_fields_and_values_are_logged_once_not_dropped_silently(caplog: pytest.LogCaptureFixture) -> None:
    wire = {"ok": True, "status": "recording", "steps_requested": 3, "brand_new_field": 1, "window": "fortnight"}
    with caplog.at_level(logging.WARNING, logger="gpudoctor.agent.protocol"):
        first = from_wire(ProfileReply, wire)
        from_wire(ProfileReply, wire)
    assert first.status is ProfileState.RECORDING and first.window is WindowKind.STEPS
    messages = [r.getMessage() for r in caplog.records]
    assert sum("brand_new_field" in m for m in messages) == 1, messages
    assert sum("fortnight" in m for m in messages) == 1, messages


def test_profile_label_and_state_predicates() -> None:
    assert ProfileReply(ProfileState.RECORDING, 5, 2).label() == "recording 2/5"
    assert ProfileReply(ProfileState.RECORDING, 5, 0, window=WindowKind.TIME, window_s=3.0).label() == \
        "recording 3 s window"
    assert ProfileState.ARMED.busy and not ProfileState.ANALYSING.busy and not ProfileState.ANALYSING.over
    assert f"{ProfileState.DONE}" == "done" and ProfileState.DONE == "done"
    assert StepSource.EXPLICIT.strength > StepSource.OPTIMIZER.strength > StepSource.BACKWARD.strength


def test_protocol_md_tables_are_generated_from_the_dataclasses() -> None:
    doc = AGENT_DIR / "PROTOCOL.md"
    assert doc.read_text() == protocol.protocol_doc(doc.read_text()), \
        "PROTOCOL.md is out of date: run `python -m gpudoctor.agent.protocol`"
    for cls in protocol.REPLIES:
        for f in dataclasses.fields(cls):
            assert f.metadata.get("doc") or f.name == "stats", f"{cls.__name__}.{f.name} has no doc"


def test_hello_defaults_decode_an_old_agents_reply() -> None:
    hello = from_wire(HelloReply, {"ok": True, "protocol": 1, "pid": 7, "step_source": "optimizer"})
    assert hello.pid == 7 and hello.protocol == 1 and hello.step_source is StepSource.OPTIMIZER


@pytest.mark.parametrize("name", IN_TARGET)
def test_in_target_modules_import_only_stdlib_and_the_agent(name: str) -> None:
    tree = ast.parse((AGENT_DIR / f"{name}.py").read_text())
    stdlib = set(sys.stdlib_module_names)
    for node in ast.walk(tree):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
        for full in names:
            top = full.split(".")[0]
            assert top in stdlib or top == "torch" or full.startswith("gpudoctor.agent"), f"{name} imports {full}"


def test_no_import_cycle_agent_never_imports_live() -> None:
    code = ("import sys, gpudoctor.agent.client, gpudoctor.agent.runtime, gpudoctor.agent.inject\n"
            "print('\\n'.join(m for m in sys.modules if m.startswith('gpudoctor.')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                            timeout=120).stdout.split()
    assert not [m for m in loaded if m.startswith("gpudoctor.live")], loaded
    for path in AGENT_DIR.glob("*.py"):
        assert "gpudoctor.live" not in path.read_text().replace("``gpudoctor.live", ""), path.name


def test_the_registrys_agent_rows_are_the_protocols_agent_facts() -> None:
    from gpudoctor.catalog.registry import REGISTRY
    from gpudoctor.model import Source

    rows = {spec.name for spec in REGISTRY if spec.producer == "agent" and spec.source is Source.LIVE}
    facts = set(protocol.AGENT_FACTS)
    assert facts - rows == set(), "StepStats fields with no `agent` row in catalog/registry.py (add one, or mark "\
        "the field fact=False)"
    assert rows - facts == set(), "registry `agent` rows that no StepStats field produces"
    stats = StepStats(timestamp=1.0, steps_total=3, window_steps=2, loader_workers=4, loader_batch_mib=1.0,
                      loader_prefetch_factor=2)
    from gpudoctor.live.facts import step_values
    values = step_values(stats)
    assert facts <= set(values) and values["loader_workers"] == 4 and values["step_source"] == "none"


def test_requests_decode_to_their_types_and_round_trip() -> None:
    for cls in protocol.REQUESTS:
        request = cls()
        wire = json.loads(json.dumps(protocol.request_to_wire(request)))
        assert type(protocol.request_from_wire(wire)) is cls and protocol.request_from_wire(wire) == request
    got = protocol.request_from_wire({"op": "profile", "steps": 5, "timeout_s": 30, "from_a_newer_client": 1})
    assert got == protocol.ProfileRequest(steps=5, timeout_s=30.0) and isinstance(got.timeout_s, float)
    assert protocol.request_from_wire({"op": "hello", "client": "abc"}) == protocol.HelloRequest(client="abc")


@pytest.mark.parametrize(("wire", "says"), [
    ({"op": "exec", "code": "import os"}, "unknown request 'exec'"),
    ({"op": ["hello"]}, "unknown request"),
    ({}, "unknown request 'None'"),
    ({"op": "stats", "window_s": -1}, "window_s must be a number from 0.5 to 3600, not -1"),
    ({"op": "stats", "window_s": float("inf")}, "window_s must be a number"),
    ({"op": "stats", "window_s": True}, "window_s must be a number"),
    ({"op": "profile", "steps": 2.5}, "steps must be an integer from 1 to 100"),
    ({"op": "profile", "steps": 10**9}, "steps must be an integer from 1 to 100, not 1000000000"),
    ({"op": "profile", "timeout_s": "soon"}, "timeout_s must be a number from 1 to 3600"),
    ({"op": "hello", "client": "t" * 65}, "client must be a string of 1 to 64 characters"),
    ({"op": "hello", "client": ""}, "client must be a string"),
    ({"op": "hello", "client": 7}, "client must be a string"),
])
def test_a_request_out_of_its_declared_bounds_is_refused_in_one_sentence(wire: dict[str, Any], says: str) -> None:
    with pytest.raises(protocol.BadRequest, match=re.escape(says)) as caught:
        protocol.request_from_wire(wire)
    assert str(caught.value).endswith(".") and len(str(caught.value)) < 200


def test_the_client_clamps_into_the_same_bounds_the_agent_enforces() -> None:
    low, high = protocol.bounds(protocol.StatsRequest, "window_s")
    assert protocol.clamped(protocol.StatsRequest, window_s=-5).window_s == low
    assert protocol.clamped(protocol.StatsRequest, window_s=1e9).window_s == high
    assert protocol.clamped(protocol.StatsRequest, window_s=float("nan")).window_s == 10.0
    profile = protocol.clamped(protocol.ProfileRequest, steps=10**6, timeout_s=0.0)
    assert profile.steps == protocol.bounds(protocol.ProfileRequest, "steps")[1] and isinstance(profile.steps, int)
    for request in (protocol.clamped(protocol.StatsRequest, window_s=1e9), profile):
        protocol.request_from_wire(protocol.request_to_wire(request))  # what the client sends is never refused


def test_the_agent_has_one_handler_per_request_type() -> None:
    from gpudoctor.agent.runtime import Agent

    missing = [cls.OP for cls in protocol.REQUESTS if not callable(getattr(Agent, f"_on_{cls.OP}", None))]
    assert not missing, f"request types with no Agent._on_<op> handler: {missing}"
    assert len({cls.OP for cls in protocol.REQUESTS}) == len(protocol.REQUESTS)
    hello = protocol.HelloReply(requests=tuple(cls.OP for cls in protocol.REQUESTS))
    assert set(hello.serves()) == set(protocol.REQUEST_BY_OP) >= set(protocol.V2_REQUESTS)
