"""Events of phases gpudoctor does not read are skipped at decode, and odd phases change nothing.

The strict decoder recognises an event's phase by its ``ph`` (a tagged union) and skips flows,
metadata and counters without building them; a ``ph`` it does not know, or none, sends the chunk to
the loose decode. Either way the table must hold exactly the complete events and the memory
counters, and nothing may be counted as malformed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.trace.reader import K_CPU_OP, K_KERNEL, K_RUNTIME, load_trace

_BASE = [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 100.0, "dur": 50.0,
     "args": {"External id": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": 110.0, "dur": 5.0,
     "args": {"correlation": 9}},
    {"ph": "X", "cat": "kernel", "name": "sgemm_128x64", "pid": 0, "tid": 7, "ts": 120.0, "dur": 30.0,
     "args": {"stream": 7, "correlation": 9, "grid": [1, 2, 3]}},
    {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 130.0, "s": "t",
     "args": {"Device Type": 1, "Total Allocated": 4096, "Total Reserved": 8192, "Bytes": 4096}},
]
_SKIPPED = [
    {"ph": "s", "id": 9, "pid": 1, "tid": 2, "ts": 110.0, "cat": "ac2g", "name": "ac2g"},
    {"ph": "f", "id": 9, "pid": 0, "tid": 7, "ts": 120.0, "cat": "ac2g", "name": "ac2g", "bp": "e"},
    {"name": "process_name", "ph": "M", "ts": 0, "pid": 1, "tid": 0, "args": {"name": "python3"}},
    {"ph": "C", "name": "queue", "pid": 0, "ts": 120.0, "args": {"length": "not a number"}},
]


def _write(path: Path, events: list[dict]) -> Path:
    """Kineto's own layout: one event per block, so the chunked decoder runs."""
    body = ",\n".join("  " + json.dumps(e) for e in events)
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + '\n  ]\n}\n')
    return path


def _columns(path: Path) -> tuple:
    trace = load_trace(path)
    t = trace.events
    return (list(t.kind), [t.names[n] for n in t.name], list(t.ts), list(t.dur), list(t.stream),
            list(t.correlation), list(t.memory_allocated), list(t.memory_reserved), trace.malformed_events)


class _NoLooseDecode:
    def decode(self, text: object) -> None:
        raise AssertionError("a chunk of known phases went to the loose decode")


def test_flows_metadata_and_counters_are_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gpudoctor.trace.chunks._LOOSE", _NoLooseDecode())  # the strict decode must take them
    plain = _columns(_write(tmp_path / "plain.json", _BASE))
    assert plain[0] == [K_CPU_OP, K_RUNTIME, K_KERNEL]
    assert plain[6] == [4096.0] and plain[7] == [8192.0]
    assert plain[-1] == 0
    mixed = [_SKIPPED[0], *_BASE[:2], _SKIPPED[1], _BASE[2], _SKIPPED[2], _BASE[3], _SKIPPED[3]]
    assert _columns(_write(tmp_path / "mixed.json", mixed)) == plain


@pytest.mark.parametrize("odd", [
    {"ph": "Z", "name": "a phase of no format", "pid": 1, "tid": 2, "ts": 1.0},
    {"name": "no phase at all", "pid": 1, "tid": 2, "ts": 1.0, "dur": 3.0},
], ids=["unknown-ph", "no-ph"])
def test_an_unknown_or_missing_phase_is_skipped_by_the_loose_decode(tmp_path: Path, odd: dict) -> None:
    plain = _columns(_write(tmp_path / "plain.json", _BASE))
    assert _columns(_write(tmp_path / "odd.json", [*_BASE[:2], odd, *_BASE[2:]])) == plain


def test_complete_events_skip_the_memory_keys_strictly_and_loosely(tmp_path: Path) -> None:
    """Only instant events' args are read for the memory counters: a complete event whose ``Device Type``
    or ``Total Allocated`` is odd is kept whole, whether its chunk is decoded strictly or loosely (an
    unknown ``ph`` elsewhere sends the chunk to the loose decode), and nothing is counted as malformed."""
    plain = _columns(_write(tmp_path / "plain.json", _BASE))
    odd_args = [dict(_BASE[0], args={"Device Type": [1], "Total Allocated": "a lot"}), *_BASE[1:]]
    assert _columns(_write(tmp_path / "strict.json", odd_args)) == plain
    unknown = {"ph": "Z", "name": "a phase of no format", "pid": 1, "tid": 2, "ts": 1.0}
    assert _columns(_write(tmp_path / "loose.json", [*odd_args, unknown])) == plain
    bad_memory = [*_BASE[:3], dict(_BASE[3], args={**_BASE[3]["args"], "Device Type": [1]}), unknown]
    assert _columns(_write(tmp_path / "bad_memory.json", bad_memory))[-1] == 1  # an instant's odd Device Type still counts
