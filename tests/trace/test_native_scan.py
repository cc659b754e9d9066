"""The C scanner of Kineto events (trace/_kineto.c) builds exactly the table the msgspec path builds.

The scanner handles only well-formed, strictly typed events and hands every other chunk back (None)
with the Builder's dicts untouched; these tests run each input through both paths and compare
everything the table holds — columns, interned names and threads, memory counters, malformed-event
counts, the schema mark — and the error, when there is one. Inputs: every real trace at hand, the
committed test traces, hand-made edge cases (each a difference msgspec makes), and random events.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpudoctor.trace import chunks, native, reader
from gpudoctor.trace.chunks import MAX_TAIL_TRIES, _decode_events
from gpudoctor.trace.events import Builder, _Event
from gpudoctor.trace.reader import load_trace

pytestmark = pytest.mark.skipif(not native.available(), reason="the C trace scanner is not built here")

DATA = Path(__file__).resolve().parents[1] / "data" / "trace"
TRACES = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces"  # as conftest.trace_path
_DECODER = msgspec.json.Decoder(list[_Event])


def _fold(chunk: bytes, use_native: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    """Everything one chunk leaves in a fresh Builder (or the error it raises), by one path."""
    builder = Builder()
    builder._name_ids["seen before"] = 0  # a chunk after others: ids continue from what is interned
    builder._thread_ids[(1, 1)] = 0
    with monkeypatch.context() as m:
        if not use_native:
            m.setattr(native, "scan", None)
        try:
            _decode_events(_DECODER, bytearray(chunk), builder)
        except Exception as exc:  # the same error either way
            return ("error", type(exc).__name__, str(exc))
    t = builder.finish()
    return (t.names, t.threads, bytes(t.kind), t.name.tobytes(), t.thread.tobytes(), t.ts.tobytes(),
            t.dur.tobytes(), t.stream.tobytes(), t.correlation.tobytes(), t.nbytes.tobytes(),
            t.memory_ts.tobytes(), t.memory_allocated.tobytes(), t.memory_reserved.tobytes(),
            t.ns_resolution, builder.old_schema, dict(builder.malformed))


def _same(chunk: bytes, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    fast, slow = _fold(chunk, True, monkeypatch), _fold(chunk, False, monkeypatch)
    assert fast == slow, chunk[:300]
    return fast


def _real_traces() -> list[Path]:
    found = sorted(DATA.glob("*.json.gz"))
    if TRACES.exists():
        found += sorted(TRACES.glob("h200/*.json.gz")) + sorted(TRACES.glob("public/**/*.json.gz"))
    return found


@pytest.mark.parametrize("path", _real_traces(), ids=lambda p: p.name)
def test_real_traces_give_the_same_table(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = load_trace(path)
    monkeypatch.setattr(native, "scan", None)
    slow = load_trace(path)
    assert fast.events == slow.events  # every column (and the caches, empty before any analysis)
    assert (fast.schema, fast.malformed_events, fast.notes) == (slow.schema, slow.malformed_events, slow.notes)


def test_the_scanner_takes_real_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's own events never fall back to msgspec (else the fast path would be a no-op)."""
    path = DATA / "h200_accelerate_cv_gd102.json.gz"
    text = gzip.decompress(path.read_bytes())
    events = text[text.index(b"[", text.index(b'"traceEvents"')):text.rindex(b"]") + 1]
    assert native.scan is not None
    assert native.scan(events, {}, {}, {}) is not None
    _same(events, monkeypatch)


def _event(**fields: Any) -> dict[str, Any]:
    base = {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 100.5, "dur": 3.25,
            "args": {"stream": 7, "correlation": 9, "grid": [1, 2, 3]}}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not _ABSENT}


_ABSENT = object()
_MEMORY = {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 1, "tid": 2, "ts": 130.0, "s": "t",
           "args": {"Device Type": 1, "Total Allocated": 4096, "Total Reserved": 8192, "Bytes": 4096}}

#: Each a way the strict decode or the Builder tells events apart; raw JSON where json.dumps can't say it.
EDGE_CASES: dict[str, str] = {
    "plain": json.dumps([_event(), _MEMORY]),
    "empty": "[]",
    "whitespace": '[ \n {"ph" : "X" ,"ts":1 ,"dur" :2 } \r\n\t]  ',
    "escaped name": json.dumps([_event(name='say "hi"\n')]),
    "unicode name": json.dumps([_event(name="núcleo ✓")], ensure_ascii=False),
    "unicode escapes in a skipped string": json.dumps([_event(args={"stream": 7, "note": "é\u2028"})]),
    "string pid": json.dumps([_event(pid="Traces", tid="PyTorch Profiler")]),
    "escaped string tid": '[{"ph":"X","ts":1,"dur":2,"pid":"a","tid":"b\\"c"}]',
    "instant with string ids": json.dumps([{"name": "Iteration Start", "ph": "i", "s": "g", "pid": "Traces",
                                            "tid": "Trace \\ PyTorch", "ts": 5.0}]),
    "float where an int belongs": json.dumps([_event(args={"stream": 7.0})]),
    "float pid": json.dumps([_event(pid=1.5)]),
    "bool stream": json.dumps([_event(args={"stream": True})]),
    "null cat": json.dumps([_event(cat=None)]),
    "null args": json.dumps([_event(args=None)]),
    "list args": json.dumps([_event(args=[1, 2])]),
    "number name": json.dumps([_event(name=12)]),
    "ts out of range": '[{"ph":"X","ts":1e400,"dur":1}]',
    "ts underflow": '[{"ph":"X","ts":1.5e-400,"dur":1}]',
    "minus zero": '[{"ph":"X","ts":-0,"dur":-0.0},{"ph":"X","ts":-0.0,"dur":0}]',
    "long integers": '[{"ph":"X","ts":123456789012345678,"dur":12345678901234567890123,"pid":999999999999999999}]',
    "integer beyond 64 bits": '[{"ph":"X","ts":1,"dur":1,"args":{"correlation":99999999999999999999}}]',
    "many digits": '[{"ph":"X","ts":5106148742673.6801234567890123,"dur":0.1000000000000000055511151231257827}]',
    "exponents": '[{"ph":"X","ts":1.5E+3,"dur":25e-1},{"ph":"X","ts":1e22,"dur":1e23}]',
    "ns timestamps": json.dumps([_event(ts=1700000000123456.789, dur=0.001)]),
    "negative duration": json.dumps([_event(), _event(dur=-1.0), _event(name="after")]),
    "missing ts": json.dumps([_event(ts=_ABSENT), _event(name="after")]),
    "string ts": json.dumps([_event(ts="12")]),
    "duplicate key": '[{"ph":"X","ts":1,"dur":1,"cat":"a","cat":"kernel"}]',
    "duplicate args key": '[{"ph":"X","ts":1,"dur":1,"args":{"stream":1,"stream":2}}]',
    "escaped key": '[{"ph":"X","p\\u0069d":5,"ts":1,"dur":1}]',
    "unknown phase": json.dumps([_event(), _event(ph="Q")]),
    "missing phase": json.dumps([_event(ph=_ABSENT)]),
    "phase not a string": json.dumps([_event(ph=1)]),
    "skipped phases": json.dumps([{"ph": p, "ts": "x", "args": None} for p in "BEIbnestfPONDMVvRc()STpFCG"]),
    "not an object": json.dumps([_event(), 5, "x", None, [1]]),
    "the Trace span": json.dumps([_event(cat="Trace", name="PyTorch Profiler", ts=_ABSENT), _event()]),
    "2021 categories": json.dumps([_event(cat="Operator"), _event(cat="Kernel"), _event(cat="cpu_op")]),
    "unknown category": json.dumps([_event(cat="overhead"), _event(cat="kernel")]),
    "memory without device type": json.dumps([{**_MEMORY, "args": {"Total Allocated": 5}}]),
    "memory of another device": json.dumps([{**_MEMORY, "args": {**_MEMORY["args"], "Device Type": 0}}]),
    "memory without reserved": json.dumps([{**_MEMORY, "args": {"Device Type": 1, "Total Allocated": 5}}]),
    "memory with a string total": json.dumps([{**_MEMORY, "args": {"Device Type": 1, "Total Allocated": "5"}}]),
    "complete event with memory keys": json.dumps([_event(args={"Total Allocated": "x", "Device Type": 1.5})]),
    "deep args": '[{"ph":"X","ts":1,"dur":1,"args":' + "[" * 80 + "]" * 80 + "}]",
    "control character": '[{"ph":"X","ts":1,"dur":1,"name":"a\x01"}]',
    "bad escape": '[{"ph":"X","ts":1,"dur":1,"x":"\\q"}]',
    "truncated": json.dumps([_event(), _event()])[:-20],
    "trailing garbage": json.dumps([_event()]) + " x",
    "leading zero": '[{"ph":"X","ts":01,"dur":1}]',
    "bare minus": '[{"ph":"X","ts":1,"dur":1,"x":-}]',
    "trailing comma": '[{"ph":"X","ts":1,"dur":1,},]',
    "literals": '[{"ph":"X","ts":1,"dur":1,"a":true,"b":false,"c":null,"d":[true,false,null]}]',
    "bad literal": '[{"ph":"X","ts":1,"dur":1,"a":tru}]',
}


@pytest.mark.parametrize("name", list(EDGE_CASES))
def test_edge_cases_match(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _same(EDGE_CASES[name].encode(), monkeypatch)


def test_invalid_utf8_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    _same(b'[{"ph":"X","ts":1,"dur":1,"name":"a\xff"}]', monkeypatch)  # a name: the strict decode rejects it
    _same(b'[{"ph":"X","ts":1,"dur":1,"x":"a\xff"}]', monkeypatch)  # a skipped string: msgspec skips it
    _same(b'[{"ph":"X","ts":1,"dur":1,"pid":"\xff","tid":1}]', monkeypatch)


def test_a_chunk_it_hands_back_leaves_the_dicts_as_they_were() -> None:
    assert native.scan is not None
    names, threads = {"a": 0}, {(1, 2): 0}
    chunk = json.dumps([_event(name="new"), _event(pid=3, tid=4), _event(args={"stream": "x"})]).encode()
    assert native.scan(chunk, names, threads, {}) is None
    assert names == {"a": 0} and threads == {(1, 2): 0}


def test_ids_continue_across_chunks_in_order_of_first_sight() -> None:
    assert native.scan is not None
    names: dict[str, int] = {}
    threads: dict[tuple[object, object], int] = {}
    native.scan(json.dumps([_event(name="b"), _event(name="a"), _event(name="b", pid="p")]).encode(), names, threads, {})
    native.scan(json.dumps([_event(name="c"), _event(name="a", pid=5)]).encode(), names, threads, {})
    assert names == {"b": 0, "a": 1, "c": 2}
    assert threads == {(0, 7): 0, ("p", 7): 1, (5, 7): 2}


_values = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                    st.text(max_size=6), st.lists(st.integers(0, 9), max_size=3))
_numbers = st.one_of(st.integers(-10, 2**64), st.floats(allow_nan=False, allow_infinity=False), _values)
_names = st.sampled_from(["k1", "k2", "aten::mm", 'q"uote', "ü", ""])
_events = st.fixed_dictionaries(
    {"ph": st.sampled_from(["X", "X", "X", "i", "f", "M"])},
    optional={"cat": st.one_of(st.sampled_from(["kernel", "cpu_op", "Trace", "Kernel", "gpu_memcpy", "x"]), _values),
              "name": st.one_of(_names, _values), "pid": st.one_of(st.integers(0, 3), st.just("Spans"), _values),
              "tid": st.one_of(st.integers(0, 3), _values), "ts": _numbers, "dur": _numbers,
              "args": st.one_of(st.fixed_dictionaries({}, optional={
                  "stream": _numbers, "correlation": st.integers(-1, 10), "bytes": _numbers,
                  "Device Type": st.one_of(st.just(1), _values), "Total Allocated": _numbers,
                  "Total Reserved": _numbers, "Input Dims": st.lists(st.lists(st.integers(0, 99)))}), _values)})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_events, max_size=8), st.sampled_from([(",", ":"), (", ", ": "), (",\n  ", " : ")]))
def test_random_events_match(monkeypatch: pytest.MonkeyPatch, events: list[dict[str, Any]],
                             separators: tuple[str, str]) -> None:
    _same(json.dumps(events, separators=separators, ensure_ascii=False).encode(), monkeypatch)


_HEADER = {"schemaVersion": 1, "deviceProperties": [{"name": "NVIDIA H200", "totalGlobalMem": 1, "computeMajor": 9}],
           "distributedInfo": {"rank": 3, "world_size": 8, "backend": "nccl"}}
_EVENTS = [_event(), _event(name="aten::mm", cat="cpu_op", args={"External id": 4}), _MEMORY,
           {"ph": "M", "name": "process_name", "pid": "Spans", "tid": 0, "args": {"name": "x"}}]

#: Whole documents without Kineto's one-event-per-line layout (``json.dump`` of a trace, as HTA's
#: test traces are): the scanner takes those whose ``traceEvents`` array closes the document, and
#: every other one goes to msgspec as before. Each must give the same trace either way.
WHOLE_DOCUMENTS: dict[str, str] = {
    "events last": json.dumps({**_HEADER, "traceEvents": _EVENTS}),
    "events only": json.dumps({"traceEvents": _EVENTS}),
    "events first, keys after": json.dumps({"traceEvents": _EVENTS, **_HEADER, "traceName": "x.json"}),
    "a bracket in a key after": json.dumps({"traceEvents": _EVENTS, "displayTimeUnit": "[ms]"}),
    "header of the wrong type": json.dumps({"schemaVersion": {"v": 1}, "traceEvents": _EVENTS}),
    "an escape in a name": json.dumps({**_HEADER, "traceEvents": [_event(name='say "hi"')]}),
    "malformed header": '{"schemaVersion": 1,, "traceEvents": [' + json.dumps(_event()) + "]}",
    "malformed events": '{"schemaVersion": 1, "traceEvents": [{"ph": "X", "ts": 1, "dur": }]}',
    "truncated after the events": '{"traceEvents": [' + json.dumps(_event()) + "]",
    "bare array": json.dumps(_EVENTS),
    "header after the events": '{"traceEvents": ' + json.dumps(_EVENTS) + ", " + json.dumps(_HEADER)[1:],
    "a member before and after": json.dumps({"distributedInfo": {"rank": 1}, "traceEvents": _EVENTS})[:-1]
    + ', "distributedInfo": {"rank": 2}}',
    "two commas after the events": '{"traceEvents": [' + json.dumps(_event()) + '],, "traceName": "x"}',
    "no comma after the events": '{"traceEvents": [' + json.dumps(_event()) + '] "traceName": "x"}',
    "a list member after": json.dumps({"traceEvents": _EVENTS, "deviceProperties": [{"name": "A100"}], "x": [[1]]}),
}


def _loaded(path: Path) -> tuple[Any, ...]:
    try:
        t = load_trace(path)
    except Exception as exc:  # the same error either way
        return ("error", type(exc).__name__, str(exc))
    e = t.events
    return (e.names, e.threads, bytes(e.kind), e.name.tobytes(), e.ts.tobytes(), e.dur.tobytes(), e.stream.tobytes(),
            e.correlation.tobytes(), e.memory_ts.tobytes(), t.schema, t.malformed_events, t.notes, t.rank,
            t.world_size, t.device_name)


@pytest.mark.parametrize("name", list(WHOLE_DOCUMENTS))
def test_whole_documents_give_the_same_trace(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "rank3.json"
    path.write_text(WHOLE_DOCUMENTS[name])
    fast = _loaded(path)
    monkeypatch.setattr(native, "scan", None)
    assert fast == _loaded(path)


def test_a_dumped_real_trace_is_scanned_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real trace written by json.dump (one line) goes through the C scanner in one call."""
    doc = json.loads(gzip.decompress((DATA / "h200_tf32_off_window.json.gz").read_bytes()))
    path = tmp_path / "one_line.json"
    path.write_text(json.dumps(doc))
    calls: list[bool] = []
    real = Builder.add_scanned

    def spy(self: Builder, chunk: Any) -> bool:
        calls.append(real(self, chunk))
        return calls[-1]

    monkeypatch.setattr(Builder, "add_scanned", spy)
    fast = _loaded(path)
    assert calls == [True]
    monkeypatch.setattr(native, "scan", None)
    assert fast == _loaded(path)


def test_a_tail_of_many_lists_after_the_events_is_not_searched_bracket_by_bracket(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each "]" followed by a comma in the members after the array is a candidate end whose rest is
    copied and decoded: 20 k of them in ~0.9 MB (none of them the end: the document is malformed)
    took ~2.5 s of copies before the tries were capped. The scan gives up after a few and msgspec
    reads the document: the same error."""
    path = tmp_path / "rank0.json"
    path.write_text('{"traceEvents": ' + json.dumps(_EVENTS) + ', "x": [' + f"[{' ' * 40}1]," * 20_000 + '[1]], "y": }')
    tries: list[int] = []
    real = reader.decode_members

    def counted(text: bytes | None, kind: Any) -> Any:
        tries.append(len(text or b""))
        return real(text, kind)

    monkeypatch.setattr(reader, "decode_members", counted)  # the header
    monkeypatch.setattr(chunks, "decode_members", counted)  # the candidate ends (chunks.array_ends)
    fast = _loaded(path)
    assert 1 < len(tries) <= MAX_TAIL_TRIES + 1  # the header, then at most MAX_TAIL_TRIES candidate ends
    monkeypatch.setattr(native, "scan", None)
    assert fast == _loaded(path)
