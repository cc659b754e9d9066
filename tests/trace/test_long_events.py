"""Events longer than a read block: the chunked reader grows its buffer and finds the next boundary.

The search for an event boundary after a block is appended starts at the last ``}`` already seen,
not at the start of the buffer (a separator holds only whitespace and ``,`` between its ``}`` and
``{``); the events found must be exactly those of a one-chunk read, for Kineto's own separator and
for the looser ones the reader also accepts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpudoctor.trace.reader import load_trace


def _event(i: int, pad: int) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": f"op{i % 7}", "pid": 1, "tid": 2, "ts": float(i), "dur": 1.0,
            "args": {"pad": "}" * (pad // 3) + "x" * pad, "nested": {"a": [1, {"b": "}"}]}}}


@pytest.mark.parametrize("separator", [",\n  ", " ,\n  ", ",\n\n  ", "\t,  \n  "], ids=["kineto", "space", "blank-line", "tabs"])
def test_events_longer_than_a_block_read_like_one_chunk(tmp_path: Path, separator: str) -> None:
    events = [_event(i, pad) for i, pad in enumerate([10, 70_000, 5, 200_000, 3, 3, 150_000, 40] * 3)]
    body = separator.join("  " + json.dumps(e) if k == 0 else json.dumps(e) for k, e in enumerate(events))
    path = tmp_path / "long.json"
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + '\n  ]\n}\n')
    whole = load_trace(path, chunk_bytes=1 << 30).events
    small = load_trace(path, chunk_bytes=1 << 14).events  # every long event spans several blocks
    assert len(whole) == len(small) == len(events)
    assert list(small.ts) == list(whole.ts) == [float(i) for i in range(len(events))]
