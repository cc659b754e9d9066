"""The background inflater: ISA-L (when installed) and zlib give the same bytes and the same errors."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.trace import gunzip
from gpudoctor.trace.gunzip import GunzipStream
from gpudoctor.trace.reader import TraceFileError, load_trace

FAST = [True, False] if gunzip._fast_zlib is not None else [False]


def _inflate(path: Path, fast: bool) -> bytes:
    with GunzipStream(path.open("rb"), fast=fast) as stream:
        return stream.read(-1)


@pytest.mark.parametrize("fast", FAST)
def test_members_and_trailing_garbage_read_as_gzip_does(tmp_path: Path, trace_file: Callable[[str], Path],
                                                        fast: bool) -> None:
    text = gzip.decompress(trace_file("h200/compile_break.json.gz").read_bytes())
    cut = len(text) // 3
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]) + b"trailing garbage")
    assert _inflate(multi, fast) == text


@pytest.mark.parametrize("fast", FAST)
def test_a_corrupt_stream_ends_in_zlibs_words(tmp_path: Path, trace_file: Callable[[str], Path], fast: bool) -> None:
    """Whichever inflater runs, the user reads zlib's sentence (ISA-L's own wording differs)."""
    data = bytearray(trace_file("public/hta/trace_filter/sampled_rank-0.json.gz").read_bytes())
    for i in range(5000, 5100):
        data[i] ^= 0x55
    bad = tmp_path / "corrupt.json.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(zlib.error) as direct:
        zlib.decompressobj(31).decompress(bytes(data))
    with pytest.raises(zlib.error) as raised:
        _inflate(bad, fast)
    assert str(raised.value) == str(direct.value)
    if fast:
        with pytest.raises(TraceFileError) as err:
            load_trace(bad)
        assert f"({direct.value})" in str(err.value) and str(err.value).count(".") >= 1


@pytest.mark.skipif(gunzip._fast_zlib is None, reason="isal is not installed")
def test_isal_and_zlib_give_the_same_table(trace_file: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    path = trace_file("public/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    fast = load_trace(path).events
    monkeypatch.setattr(gunzip, "_fast_zlib", None)
    slow = load_trace(path).events
    assert len(fast) == len(slow) > 1000
    assert fast.ts == slow.ts and fast.name == slow.name and fast.names == slow.names
