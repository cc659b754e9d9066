"""Property-based fuzzing of ``gpudoctor analyze`` in process (issue 15): mutated real traces in, one answer out.

Seeds are real torch.profiler traces (the H200 ``compile_break`` trace, the first steps of the
DataLoader-bound one, and the analyze corpus' tiny trace), written in Kineto's layout or as one-line
JSON, plain or gzipped. Each example mutates one seed, either as bytes (truncation, deletions,
duplications, byte flips, hostile tokens: deep brackets, huge numbers, NUL, invalid UTF-8) or as a
document (keys deleted, values changed to other types: a string ``ts``, a negative ``dur``, ``"args":
[1]``, an event replaced by an array, a 400-digit integer), and runs the real CLI ``main`` on it.
Properties: the exit code is 0, 1 or 2 (never 70), stderr is at most one ``gpudoctor:`` line and never
a traceback, and one run ends within a wall-time bound. Derandomized, fixed example budgets (about
15 s in all on the 2-core development machine).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gzip
import io
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudoctor.commands.common as common
from gpudoctor.cli import main

REPO = Path(__file__).resolve().parents[2]
TRACES = REPO.parent / "shared" / "traces"
CORPUS_TRACE = Path(__file__).resolve().parent / "corpus" / "analyze" / "ok.json"
BUDGET = settings(max_examples=int(os.environ.get("GPUDOCTOR_FUZZ_EXAMPLES", "40")), deadline=None,
                  derandomize=True, database=None, suppress_health_check=list(HealthCheck))
MAX_RUN_S = 20.0  # wall time of one in-process run; a hang, not a slow machine, gets past this
EXITS = {0, 1, 2}
TOKENS = [b"[" * 1200, b"{" * 600, b"]", b"}", b",", b'"', b"\\", b"\x00", b"\xff\xfe", b"1" + b"0" * 400, b"-1e999",
          b"NaN", b"null", b'"ts": "12"', b'"dur": -5', b'"args": [1]', b'"traceEvents": [[', b"},\n  {", b"\n  ]\n}"]


@functools.cache
def _seed_docs() -> tuple[dict[str, Any], ...]:
    docs = [json.loads(CORPUS_TRACE.read_text(encoding="utf-8"))]
    for name, keep in (("compile_break.json.gz", None), ("loader_bound.json.gz", 1500)):
        path = TRACES / "h200" / name
        if path.exists():
            doc = json.loads(gzip.decompress(path.read_bytes()))
            if keep:
                doc["traceEvents"] = doc["traceEvents"][:keep]
            docs.append(doc)
    return tuple(docs)


def _kineto(doc: dict[str, Any]) -> bytes:
    """Kineto's own layout: one event per block (so the chunked reader is exercised)."""
    head = {k: v for k, v in doc.items() if k != "traceEvents"}
    events = doc.get("traceEvents")
    if not isinstance(events, list):
        return json.dumps(doc).encode()
    body = json.dumps(head, indent=2)[:-2] + ',\n  "traceEvents": [\n'
    return (body + ",\n".join("  " + json.dumps(e) for e in events) + "\n  ]\n}\n").encode()


@pytest.fixture(scope="module", autouse=True)
def _cached_builtin_catalog() -> Iterator[None]:
    """Load the built-in catalog once (0.2 s per load); the traces are what is fuzzed here."""
    real = common.load_catalog
    cached = functools.lru_cache(maxsize=1)(lambda: real([]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(common, "load_catalog", lambda dirs=(): real(dirs) if list(dirs) else cached())
        yield


_WEIRD_VALUES = st.sampled_from([None, "12", "", -1, -1.5e9, 10**400, 1e308, True, [1], {"a": [1]}, [[[]]], "0x7"])


@st.composite
def mutated_document(draw: st.DrawFn) -> dict[str, Any]:
    doc = copy.deepcopy(draw(st.sampled_from(_seed_docs())))
    events = doc["traceEvents"]
    for _ in range(draw(st.integers(min_value=1, max_value=8))):
        op = draw(st.sampled_from(["delete_key", "change_value", "replace_event", "negate_dur", "drop_header",
                                   "duplicate_event"]))
        if op == "drop_header":
            doc.pop(draw(st.sampled_from(["deviceProperties", "distributedInfo", "schemaVersion", "traceEvents"])),
                    None)
            continue
        if not isinstance(doc.get("traceEvents"), list) or not events:
            break
        k = draw(st.integers(min_value=0, max_value=len(events) - 1))
        event = events[k]
        if not isinstance(event, dict):
            continue
        if op == "delete_key" and event:
            event.pop(draw(st.sampled_from(sorted(event))), None)
        elif op == "change_value":
            key = draw(st.sampled_from(["ts", "dur", "ph", "cat", "name", "pid", "tid", "args"]))
            event[key] = draw(_WEIRD_VALUES)
        elif op == "replace_event":
            events[k] = draw(_WEIRD_VALUES)
        elif op == "negate_dur" and isinstance(event.get("dur"), (int, float)):
            event["dur"] = -event["dur"]
        elif op == "duplicate_event":
            events.insert(k, copy.deepcopy(event))
    return doc


@st.composite
def mutated_bytes(draw: st.DrawFn) -> bytes:
    data = bytearray(_kineto(draw(st.sampled_from(_seed_docs()))))
    for _ in range(draw(st.integers(min_value=1, max_value=5))):
        op = draw(st.sampled_from(["truncate", "delete", "insert", "duplicate", "flip"]))
        pos = draw(st.integers(min_value=0, max_value=len(data)))
        if op == "truncate":
            del data[pos:]
        elif op == "delete":
            del data[pos:pos + draw(st.integers(min_value=1, max_value=400))]
        elif op == "insert":
            data[pos:pos] = draw(st.one_of(st.sampled_from(TOKENS), st.binary(max_size=16)))
        elif op == "duplicate":
            chunk = bytes(data[pos:pos + draw(st.integers(min_value=1, max_value=300))])
            data[pos:pos] = chunk * draw(st.integers(min_value=1, max_value=20))
        elif data:
            data[min(pos, len(data) - 1)] = draw(st.integers(min_value=0, max_value=255))
    return bytes(data)


def run_analyze(data: bytes, name: str) -> tuple[int, str, str]:
    with tempfile.TemporaryDirectory(prefix="gpudoctor-fuzz-") as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        out, err = io.StringIO(), io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["analyze", str(path), "--format", "json", "--jobs", "1"])
        elapsed = time.monotonic() - started
    assert elapsed < MAX_RUN_S, f"one run took {elapsed:.1f} s"
    return code, out.getvalue(), err.getvalue()


def _check(code: int, out: str, err: str) -> None:
    assert code in EXITS, f"exit {code}: {err}"
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") <= 1, err
    if err:
        assert err.startswith("gpudoctor: "), err
    if code in (0, 1):
        report = json.loads(out)
        for rank in report["ranks"]:  # whatever got in, no impossible percentage comes out
            for key, value in rank.items():
                if key.endswith("_pct") and isinstance(value, (int, float)) and key != "bound_share_pct":
                    assert -0.01 <= value <= 100.01, (key, value)


@BUDGET
@given(doc=mutated_document(), layout=st.sampled_from(["kineto", "one-line", "gzip"]))
def test_mutated_documents_get_an_answer(doc: dict[str, Any], layout: str) -> None:
    data = _kineto(doc) if layout != "one-line" else json.dumps(doc).encode()
    if layout == "gzip":
        data = gzip.compress(data, compresslevel=1)
    _check(*run_analyze(data, "rank0.json.gz" if layout == "gzip" else "rank0.json"))


@BUDGET
@given(data=mutated_bytes(), compress=st.booleans())
def test_mutated_bytes_get_an_answer(data: bytes, compress: bool) -> None:
    if compress:
        data = gzip.compress(data, compresslevel=1)
    _check(*run_analyze(data, "rank0.json.gz" if compress else "rank0.json"))
