"""The Kineto reader on real traces of every kind, and its one-sentence errors on bad files."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from gpudoctor.exitcodes import ExitCode, UserError
from gpudoctor.trace.reader import K_KERNEL, K_MEMCPY, RankTrace, find_trace_files, load_trace, read_traces


@pytest.fixture
def fork_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let these tests fork even where an earlier test in this worker left a thread running (the
    thread rule itself is tested in tests/core/test_forkpool.py); these only compare the tables."""
    from gpudoctor import forkpool

    monkeypatch.setattr(forkpool, "can_fork", lambda: True)


def test_today_schema_with_ns_timestamps(trace_file: Callable[[str], Path]) -> None:
    tr = load_trace(trace_file("h200/resnet_fp32.json.gz"))
    assert tr.schema == "kineto"
    assert tr.events.ns_resolution
    assert tr.device_name == "NVIDIA H200"
    assert tr.rank == 0 and tr.rank_from == "position"
    assert sum(1 for k in tr.events.kind if k == K_KERNEL) == 1504  # what the file holds
    assert any("no distributedInfo" in n for n in tr.notes)


def test_2021_schema_categories(trace_file: Callable[[str], Path]) -> None:
    tr = load_trace(trace_file(
        "public/tb_plugin_resnet50/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"))
    assert tr.schema == "kineto-2021"
    assert not tr.events.ns_resolution
    names = tr.events.names
    assert any(tr.events.kind[i] == K_MEMCPY and names[tr.events.name[i]].startswith("Memcpy HtoD (Pageable")
               for i in range(len(tr.events)))


def test_rank_from_distributed_info_and_file_name(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    assert load_trace(trace_file("public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz")).rank == 34
    # Same content without distributedInfo, under a rank-named file: the name decides.
    doc = json.loads(gzip.decompress(trace_file("public/hta/triton_example/triton_example.json.gz").read_bytes()))
    doc.pop("distributedInfo", None)
    target = tmp_path / "job_rank7.json"
    target.write_text(json.dumps(doc))
    tr = load_trace(target)
    assert (tr.rank, tr.rank_from) == (7, "file name")


@pytest.mark.parametrize("relative", [
    "public/hta/mtia_trace_single_rank/mtia_rank_0.json.gz",
    "public/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
    "public/hta/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz",
    "public/hta/rank_non_gpu/rank_non_gpu.json.gz",
    "public/hta/distributed_info_unavailable/distributed_info_not_found.json.gz",
])
def test_edge_case_traces_load_with_a_note(relative: str, trace_file: Callable[[str], Path]) -> None:
    tr = load_trace(trace_file(relative))
    assert len(tr.events) > 0
    assert tr.notes, "an unusual trace must say what is missing"


def test_chunked_decoding_matches_whole_file(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    """Decoding the traceEvents array in 64 KiB chunks gives exactly the single-chunk result."""
    src = trace_file("h200/loader_bound.json.gz")
    whole = load_trace(src, chunk_bytes=1 << 30).events
    small = load_trace(src, chunk_bytes=1 << 16).events
    assert len(whole) == len(small) > 10_000
    assert [whole.names[i] for i in whole.name] == [small.names[i] for i in small.name]
    assert list(whole.ts) == list(small.ts)
    assert list(whole.correlation) == list(small.correlation)


def test_compact_json_without_kineto_layout(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    """A trace re-written by json.dump (one line) is read by the whole-file path."""
    doc = json.loads(gzip.decompress(trace_file("h200/compile_break.json.gz").read_bytes()))
    target = tmp_path / "compact.json"
    target.write_text(json.dumps(doc, separators=(",", ":")))
    assert len(load_trace(target).events) == len(load_trace(trace_file("h200/compile_break.json.gz")).events)


def _expect_usage_error(path: Path, fragment: str) -> None:
    with pytest.raises(UserError) as info:
        load_trace(path)
    assert info.value.code == ExitCode.USAGE
    message = str(info.value)
    assert fragment in message and "\n" not in message


def test_truncated_gzip(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    data = trace_file("h200/resnet_bf16.json.gz").read_bytes()
    bad = tmp_path / "cut.json.gz"
    bad.write_bytes(data[: len(data) // 2])
    _expect_usage_error(bad, "truncated or corrupt")


def test_truncated_json(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    text = gzip.decompress(trace_file("h200/compile_break.json.gz").read_bytes())
    bad = tmp_path / "cut.json"
    bad.write_bytes(text[: len(text) * 2 // 3])
    _expect_usage_error(bad, "not a valid trace")


def test_not_json(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text("this is not json at all\n")
    _expect_usage_error(bad, "not a valid trace")


def test_foreign_json(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    bad = tmp_path / "package.json"
    bad.write_text(json.dumps({"name": "left-pad", "version": "1.3.0"}))
    _expect_usage_error(bad, "not a torch.profiler trace")


def test_directory_of_ranks_and_missing_paths(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    traces = read_traces([trace_file("public/hta/trace_filter")])
    assert sorted(t.rank for t in traces) == [0, 1]
    with pytest.raises(UserError):
        find_trace_files([tmp_path / "nope"])
    with pytest.raises(UserError):
        find_trace_files([tmp_path])  # empty directory


def test_directory_skips_json_that_is_not_a_trace(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    (tmp_path / "rank0.json.gz").write_bytes(trace_file("h200/compile_break.json.gz").read_bytes())
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    traces = read_traces([tmp_path])
    assert len(traces) == 1 and any("config.json" in n for n in traces[0].notes)
    with pytest.raises(UserError):  # named explicitly, it is an error
        read_traces([tmp_path / "config.json"])
    (tmp_path / "rank0.json.gz").unlink()
    with pytest.raises(UserError) as info:
        read_traces([tmp_path])
    assert info.value.code == ExitCode.USAGE


def _same_table(one: RankTrace, two: RankTrace) -> None:
    assert len(one.events) == len(two.events) > 10_000
    assert one.events.names == two.events.names and one.events.threads == two.events.threads
    for column in ("kind", "name", "thread", "ts", "dur", "stream", "correlation", "nbytes", "memory_ts"):
        assert getattr(one.events, column) == getattr(two.events, column), column
    assert two.device_name == one.device_name == "NVIDIA H200"


@pytest.mark.usefixtures("fork_allowed")
def test_two_process_decoding_matches_one_process(tmp_path: Path, trace_file: Callable[[str], Path],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The forked second-half decoder of a plain file gives the same columns, names and header as one process."""
    from gpudoctor.trace import reader, split

    plain = tmp_path / "rank0.json"
    plain.write_bytes(gzip.decompress(trace_file("h200/loader_bound.json.gz").read_bytes()))
    one = load_trace(plain, chunk_bytes=1 << 16)
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "HEADER_BYTES", 1 << 16)  # the half must lie past the first read
    assert reader._split_worthwhile(plain.stat().st_size, 1 << 16)
    halves = []
    monkeypatch.setattr(split, "_merge", lambda b, body, merge=split._merge: halves.append(1) or merge(b, body))
    two = load_trace(plain, chunk_bytes=1 << 16, processes=2)
    assert halves == [1]  # the child did decode a half
    _same_table(one, two)
    # A corrupt second half is reported as one sentence, as in one process.
    data = plain.read_bytes()
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: len(data) * 3 // 4])
    with pytest.raises(UserError) as info:
        load_trace(cut, chunk_bytes=1 << 16, processes=2)
    assert info.value.code == ExitCode.USAGE


@pytest.mark.usefixtures("fork_allowed")
def test_two_process_decoding_of_gzip_matches_one_process(tmp_path: Path, trace_file: Callable[[str], Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip trace split by the child that inflates it itself: same table; a truncated or lying file
    ends in the same sentence as in one process, with no child left behind."""
    from gpudoctor.trace import reader, split

    source = trace_file("h200/loader_bound.json.gz")
    children_before = {c.pid for c in psutil.Process().children()}  # another test's (multiprocessing's tracker)
    one = load_trace(source, chunk_bytes=1 << 16)
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(reader, "HEADER_BYTES", 1 << 16)
    halves: list[int] = []
    monkeypatch.setattr(split, "_merge", lambda b, body, merge=split._merge: halves.append(1) or merge(b, body))
    _same_table(one, load_trace(source, chunk_bytes=1 << 16, processes=2))
    assert halves == [1]
    # several members: the trailer gives the last member's size, so the half is taken elsewhere
    text = gzip.decompress(source.read_bytes())
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(text[: len(text) // 5]) + gzip.compress(text[len(text) // 5:]))
    _same_table(one, load_trace(multi, chunk_bytes=1 << 16, processes=2))
    # cut short, with the whole file's trailer: the child cannot inflate it and takes no half, so
    # this process reads on to the cut and says what one process says
    cut = tmp_path / "cut.json.gz"
    packed = source.read_bytes()
    cut.write_bytes(packed[: len(packed) * 3 // 4] + packed[-8:])  # a trailer that still looks right
    with pytest.raises(UserError) as info:
        load_trace(cut, chunk_bytes=1 << 16, processes=2)
    with pytest.raises(UserError) as serial:
        load_trace(cut, chunk_bytes=1 << 16)
    assert info.value.code == ExitCode.USAGE and str(info.value) == str(serial.value)
    assert {c.pid for c in psutil.Process().children()} <= children_before  # every child was reaped


@pytest.mark.usefixtures("fork_allowed")
def test_metrics_beside_match_one_process(trace_file: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fusion and step-picture metrics computed by a forked child: the same values in the same order."""
    from gpudoctor.trace import metrics

    monkeypatch.setattr(metrics, "BESIDE_MIN_EVENTS", 0)
    started: list[str] = []
    real = metrics._Beside.start

    def start(trace: RankTrace, steps: list[tuple[int, float, float]]) -> object:
        beside = real(trace, steps)
        assert beside is not None  # the child was forked
        started.append(trace.path)
        return beside

    monkeypatch.setattr(metrics._Beside, "start", start)
    for name in ("h200/loader_bound.json.gz", "h200/compile_break.json.gz", "public/hta/trace_filter/sampled_rank-1.json.gz"):
        path = trace_file(name)
        one = metrics.compute_rank_metrics(load_trace(path))
        assert not started
        two = metrics.compute_rank_metrics(load_trace(path), processes=2)
        assert started.pop() == str(path)
        assert list(one.values.items()) == list(two.values.items()), name
        assert one.step_rows == two.step_rows and one.collectives == two.collectives


def test_gzip_of_several_members_reads_like_one(tmp_path: Path, trace_file: Callable[[str], Path]) -> None:
    """The background inflater follows gzip members one after another, as ``gzip`` does."""
    text = gzip.decompress(trace_file("h200/compile_break.json.gz").read_bytes())
    cut = len(text) // 3
    multi = tmp_path / "multi.json.gz"
    multi.write_bytes(gzip.compress(text[:cut]) + gzip.compress(text[cut:]))
    one = load_trace(trace_file("h200/compile_break.json.gz"))
    two = load_trace(multi)
    assert len(two.events) == len(one.events) > 100
    assert list(two.events.ts) == list(one.events.ts)


def test_names_and_threads_are_interned_in_order_of_first_appearance_across_chunks() -> None:
    from gpudoctor.trace.events import Builder, _Complete

    def event(name: str, tid: int) -> _Complete:
        return _Complete(cat="cpu_op", name=name, pid=1, tid=tid, ts=1.0, dur=1.0)

    builder = Builder()
    builder.add([event("a", 7), event("b", 7), event("a", 8), event("c", 7), event("c", 9)])
    builder.add([event("c", 8), event("d", 7), event("a", 7), event("d", 10), event("e", 9)])
    table = builder.finish()
    assert table.names == ["a", "b", "c", "d", "e"]
    assert [table.names[i] for i in table.name] == ["a", "b", "a", "c", "c", "c", "d", "a", "d", "e"]
    assert table.threads == [(1, 7), (1, 8), (1, 9), (1, 10)]
    assert [table.threads[i][1] for i in table.thread] == [7, 7, 8, 7, 9, 8, 7, 7, 10, 9]
