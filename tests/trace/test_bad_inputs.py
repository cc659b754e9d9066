"""``analyze`` on the bad inputs of issue 15: one sentence and exit 2, bounded memory, honest notes.

Each test rebuilds the reproduction from a real trace (or from nothing), runs the CLI in-process
and checks the exit status, that stderr is one sentence, and what the report says.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gpudoctor.cli import main


def _analyze(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "internal error" not in err, err
    return code, out, err


def _one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("gpudoctor: ") and lines[0].endswith("."), lines[0]
    return lines[0]


def _doc(trace_file: Callable[[str], Path], relative: str = "h200/loader_bound.json.gz") -> dict[str, Any]:
    return json.loads(gzip.decompress(trace_file(relative).read_bytes()))


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return path


def test_json_nested_1000_deep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": ' + "[" * 1000 + "]" * 1000 + "}")
    code, _, err = _analyze(capsys, str(deep))
    sentence = _one_sentence(err)  # which one depends on the interpreter's recursion headroom
    assert code == 2 and ("not trace events" in sentence or "nested too deeply" in sentence)
    deeper = tmp_path / "deeper.json"
    deeper.write_text('{"traceEvents": [], "a": ' + '{"a": ' * 5000 + "1" + "}" * 5001)
    code, _, err = _analyze(capsys, str(deeper))
    assert code == 2 and "nested too deeply" in _one_sentence(err)


@pytest.mark.slow
def test_big_single_line_json_of_nested_arrays_stays_bounded(tmp_path: Path) -> None:
    """200 MB of ``traceEvents: [[[..]], ...]`` on one line peaked at 5.2 GB; now ≲ 1.5× the file."""
    big = tmp_path / "nested.json"
    item = b"[[0,1],[2,[3,4]]]"
    with big.open("wb") as fh:
        fh.write(b'{"traceEvents": [')
        fh.write(b",".join([item] * (200_000_000 // (len(item) + 1))))
        fh.write(b"]}")
    # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so it would include this test's buffers.
    probe = ("import re, sys; from gpudoctor.cli import main; code = main(['analyze', sys.argv[1]]); "
             "hwm = re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1); "
             "print(code, int(hwm) * 1024, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe, str(big)], capture_output=True, text=True, timeout=120)
    message, numbers = proc.stderr.strip().splitlines()
    code, peak = (int(x) for x in numbers.split())
    assert code == 2 and "not trace events" in message
    assert peak < 2.0 * big.stat().st_size, f"peak RSS {peak / 1e6:.0f} MB for a {big.stat().st_size / 1e6:.0f} MB file"


def test_negative_durations_are_counted_and_skipped(tmp_path: Path, trace_file: Callable[[str], Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(trace_file)
    flipped = 0
    for e in doc["traceEvents"]:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "cpu_op") and flipped < 300:
            e["dur"] = -e["dur"]
            flipped += 1
    code, out, _ = _analyze(capsys, str(_write(tmp_path / "neg.json", doc)), "--format", "json")
    report = json.loads(out)
    assert f"{flipped} malformed event(s) skipped (negative duration: {flipped})" in " ".join(report["notes"])
    rank = report["ranks"][0]
    assert rank["malformed_events"] == flipped
    for key, value in rank.items():  # no impossible percentage anywhere
        if key.endswith("_pct") and isinstance(value, (int, float)):
            assert 0.0 <= value <= 100.0, (key, value)
    assert "GD102" in [f["code"] for f in report["findings"]]  # the DataLoader events were left intact


def test_string_timestamps_are_counted(tmp_path: Path, trace_file: Callable[[str], Path],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(trace_file)
    kernels = [e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    for e in kernels[:25]:
        e["ts"] = str(e["ts"])
    code, out, _ = _analyze(capsys, str(_write(tmp_path / "strts.json", doc)), "--format", "json")
    report = json.loads(out)
    assert code in (0, 1)
    assert "25 malformed event(s) skipped (ts/dur not numbers: 25)" in " ".join(report["notes"])


def test_args_that_are_not_an_object_are_not_truncation(tmp_path: Path, trace_file: Callable[[str], Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(trace_file)
    next(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op")["args"] = [1]
    code, out, err = _analyze(capsys, str(_write(tmp_path / "args.json", doc)), "--format", "json")
    assert code in (0, 1) and "truncated" not in err
    notes = " ".join(json.loads(out)["notes"])
    assert "1 malformed event(s) skipped (args not an object: 1)" in notes


def test_a_corrupt_rank_is_named_and_the_comparison_says_it_is_missing(
        tmp_path: Path, trace_file: Callable[[str], Path], capsys: pytest.CaptureFixture[str]) -> None:
    folder = trace_file("public/hta/trace_filter")
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for src in sorted(folder.iterdir()):
        (ranks / src.name).write_bytes(src.read_bytes())
    cut = next(p for p in ranks.iterdir() if "rank-1" in p.name)
    cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
    code, out, _ = _analyze(capsys, str(ranks), "--format", "json")
    notes = json.loads(out)["notes"]
    assert any(n.startswith(f"corrupt rank trace left out: {cut.name}: ") and "truncated" in n for n in notes), notes
    assert any("rank comparison is incomplete: rank 1 missing" in n for n in notes), notes
    assert not any("not traces" in n for n in notes)  # a corrupt trace is not "a JSON file that is not a trace"


def test_paths_that_are_not_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.json"
    other = tmp_path / "other.json"
    loop.symlink_to(other)
    other.symlink_to(loop)
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.json"
    zero.symlink_to("/dev/zero")
    expected = {str(loop): "is a symbolic link loop", str(fifo): "is a named pipe (FIFO), not a trace file",
                "/dev/zero": "is a character device, not a trace file",
                str(zero): "is a character device, not a trace file",
                str(tmp_path / "missing.json"): "does not exist"}
    for path, words in expected.items():
        code, _, err = _analyze(capsys, path)
        assert code == 2 and _one_sentence(err) == f"gpudoctor: {path} {words}."
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "pipe.json").symlink_to(fifo)
    code, _, err = _analyze(capsys, str(folder))
    assert code == 2 and "no readable torch.profiler trace found among pipe.json" in _one_sentence(err)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any directory")
def test_unreadable_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "rank0.json").write_text("{}")
    locked.chmod(0)
    try:
        code, _, err = _analyze(capsys, str(locked))
    finally:
        locked.chmod(0o755)
    assert code == 2 and "cannot read directory" in _one_sentence(err)


def test_a_trace_whose_gzip_is_cut_says_so(tmp_path: Path, trace_file: Callable[[str], Path],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    data = trace_file("h200/compile_break.json.gz").read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 3])
    code, _, err = _analyze(capsys, str(cut))
    assert code == 2 and "truncated or corrupt" in _one_sentence(err)


def test_an_oversized_one_piece_document_is_one_sentence(tmp_path: Path, trace_file: Callable[[str], Path],
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.trace import reader

    doc = _doc(trace_file, "h200/compile_break.json.gz")
    one_line = tmp_path / "one-line.json"
    one_line.write_text(json.dumps(doc), encoding="utf-8")  # no Kineto layout: decoded in one piece
    monkeypatch.setattr(reader, "MAX_WHOLE_BYTES", 1 << 16)
    code, _, err = _analyze(capsys, str(one_line))
    assert code == 2 and "more than gpudoctor reads in one piece" in _one_sentence(err)


def test_a_worker_that_dies_is_one_sentence(tmp_path: Path, trace_file: Callable[[str], Path],
                                            capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.trace import analysis

    for rank in range(2):
        (tmp_path / f"rank{rank}.json.gz").write_bytes(trace_file("h200/compile_break.json.gz").read_bytes())
    monkeypatch.setattr(analysis, "analyze_rank_file", _die)
    code, _, err = _analyze(capsys, str(tmp_path), "--jobs", "2")
    assert code == 2 and "worker process reading the rank traces died" in _one_sentence(err)


def _die(path: str, position: int, processes: int = 1) -> None:
    os._exit(9)  # what the OOM killer leaves behind: a worker gone without a word


@pytest.mark.parametrize("members", ['"schemaVersion": 1 ', '"schemaVersion": 1,, '], ids=["no comma", "two commas"])
def test_kineto_layout_with_malformed_members_before_the_events(members: str, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The members before the array are decoded on their own in Kineto's layout: a missing comma, or
    two, used to be read past (the header closed as ``{"schemaVersion": 1}``)."""
    event = json.dumps({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.0, "dur": 2.0,
                        "args": {"stream": 7, "correlation": 1}})
    path = tmp_path / "rank0.json"
    path.write_text("{\n  " + members + '"traceEvents": [\n  ' + event + ",\n  " + event + "\n]}")
    code, _, err = _analyze(capsys, str(path))
    assert code == 2 and "JSON is malformed" in _one_sentence(err)


def _kineto(path: Path, events: list[dict[str, Any]]) -> Path:
    """A trace in Kineto's one-event-per-line layout (the chunked reader and the C scanner read it)."""
    body = ",\n".join("  " + json.dumps(e) for e in events)
    path.write_text('{\n  "schemaVersion": 1,\n  "traceEvents": [\n' + body + "\n  ]\n}\n", encoding="utf-8")
    return path


def _steps(n: int = 4, step_us: float = 900.0) -> list[dict[str, Any]]:
    """``n`` steps, each with a DataLoader wait, a launch and a 600 µs GEMM (the corpus's ok.json, longer)."""
    events: list[dict[str, Any]] = []
    for k in range(n):
        at = 1000.0 * (k + 1)
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{k + 1}", "pid": 1, "tid": 1, "ts": at,
             "dur": step_us},
            {"ph": "X", "cat": "user_annotation", "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
             "pid": 1, "tid": 1, "ts": at + 5, "dur": 100.0},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": at + 210,
             "dur": 10.0, "args": {"correlation": k + 1}},
            {"ph": "X", "cat": "kernel", "name": "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_nn", "pid": 0, "tid": 7,
             "ts": at + 230, "dur": 600.0, "args": {"stream": 7, "correlation": k + 1, "device": 0}},
        ]
    return events


def _steps_of(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["name"].startswith("ProfilerStep")]


def _set_all(key: str, value: float) -> Callable[[list[dict[str, Any]]], None]:
    def change(events: list[dict[str, Any]]) -> None:
        for e in _steps_of(events):
            e[key] = value
    return change


def _move_step(number: int, ts: float) -> Callable[[list[dict[str, Any]]], None]:
    def change(events: list[dict[str, Any]]) -> None:
        _steps_of(events)[number - 1]["ts"] = ts
    return change


def _scale_ts(events: list[dict[str, Any]]) -> None:
    for e in events:
        e["ts"] *= 1e296


@pytest.mark.parametrize(("change", "steps_left", "words"), [
    (_set_all("dur", 0.0), 0, "4 ProfilerStep span(s) of zero length left out (#1, #2, #3, #4)"),
    (_move_step(2, 1e15), 3, "1 ProfilerStep span(s) far outside the others left out (#2 at ts 1e+15 µs"),
    (_move_step(4, 1e17), 3, "1 malformed event(s) skipped (ts beyond 2^53 µs (285 years): 1)"),
    (_set_all("dur", 1e15), 0, "4 malformed event(s) skipped (duration above a day: 4)"),
], ids=["zero-duration-steps", "step-far-away", "step-at-1e17", "absurd-durations"])
@pytest.mark.parametrize("scanner", ["C", "Python"])
def test_impossible_step_times_are_noted_not_used(change: Callable[[list[dict[str, Any]]], None], steps_left: int,
                                                  words: str, scanner: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Zero-length steps gave ZeroDivisionError; a step moved far away flipped the verdict with no note;
    1e15 µs steps were reported as "a 1000000000000.0 ms step". The other steps keep their verdict."""
    from gpudoctor.trace import native

    if scanner == "Python":
        monkeypatch.setattr(native, "scan", None)
    elif native.scan is None:
        pytest.skip("the C scanner is not built")
    baseline = json.loads(_analyze(capsys, str(_kineto(tmp_path / "ok.json", _steps())), "--format", "json")[1])
    events = _steps()
    change(events)
    got, out, err = _analyze(capsys, str(_kineto(tmp_path / "bad.json", events)), "--format", "json")
    report = json.loads(out)
    assert got in (0, 1) and not err
    assert words in " ".join(report["notes"]), report["notes"]
    rank = report["ranks"][0]
    assert (rank.get("step_count") or 0) == steps_left
    for key, value in rank.items():
        if key.endswith("_ms") and isinstance(value, (int, float)):
            assert value < 86_400_000, (key, value)  # no day-long step made it into a number
    if steps_left:  # the steps that remain: the verdict of the trace they came from
        assert rank["bound"] == baseline["ranks"][0]["bound"]


@pytest.mark.parametrize("scanner", ["C", "Python"])
def test_timestamps_near_1e300_are_one_sentence(scanner: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor.trace import native

    if scanner == "Python":
        monkeypatch.setattr(native, "scan", None)
    events = _steps()
    _scale_ts(events)
    code, _, err = _analyze(capsys, str(_kineto(tmp_path / "far.json", events)))
    assert code == 2 and "holds no usable trace events: 16 malformed event(s) skipped (ts beyond 2^53 µs" in \
        _one_sentence(err)


@pytest.mark.parametrize("field", ["stream", "correlation"])
@pytest.mark.parametrize("scanner", ["C", "Python"])
def test_ids_beyond_64_bits_are_malformed(field: str, scanner: str, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream or correlation id of 10^20 was OverflowError (exit 70) in the column's array."""
    from gpudoctor.trace import native

    if scanner == "Python":
        monkeypatch.setattr(native, "scan", None)
    events = _steps()
    kernels = [e for e in events if e["cat"] == "kernel"]
    kernels[0]["args"][field] = 10**20
    code, out, _ = _analyze(capsys, str(_kineto(tmp_path / "ids.json", events)), "--format", "json")
    assert code in (0, 1)
    report = json.loads(out)
    assert "1 malformed event(s) skipped (args of the wrong type: 1)" in " ".join(report["notes"])
    assert report["ranks"][0]["malformed_events"] == 1


def test_output_that_is_an_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path / "x.json", _steps())
    before = trace.read_bytes()
    for output in (trace, tmp_path / "." / "x.json"):
        code, _, err = _analyze(capsys, str(trace), "-o", str(output))
        assert code == 2 and "is one of the files this command reads" in _one_sentence(err)
    code, _, err = _analyze(capsys, str(tmp_path), "-o", str(trace))  # inside a directory it reads
    assert code == 2 and "is one of the files this command reads" in _one_sentence(err)
    assert trace.read_bytes() == before
    report = tmp_path / "report.txt"
    assert _analyze(capsys, str(trace), "-o", str(report))[0] in (0, 1) and report.stat().st_size > 0


@pytest.mark.skipif(not Path("/proc/version").exists(), reason="needs /proc")
def test_output_whose_write_fails_is_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _kineto(tmp_path / "x.json", _steps())
    code, _, err = _analyze(capsys, str(trace), "-o", "/proc/version")
    assert code == 2 and _one_sentence(err).startswith("gpudoctor: cannot write /proc/version: ")
    code, _, err = _analyze(capsys, str(trace), "-o", "/dev/full")
    assert code == 2 and _one_sentence(err) == "gpudoctor: cannot write /dev/full: No space left on device."


def test_rank_files_that_are_not_regular_files_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO, a device or a symlink loop named like a rank trace was skipped with no note."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    _kineto(folder / "rank-0.json", _steps())
    os.mkfifo(folder / "rank-1.json")
    (folder / "rank-2.json").symlink_to("/dev/zero")
    (folder / "rank-3.json").symlink_to("rank-3.json")
    code, out, _ = _analyze(capsys, str(folder), "--format", "json")
    notes = json.loads(out)["notes"]
    assert code in (0, 1)
    for name, words in (("rank-1.json", "is a named pipe (FIFO)"), ("rank-2.json", "is a character device"),
                        ("rank-3.json", "is a symbolic link loop")):
        assert any(n.startswith(f"corrupt rank trace left out: {name}: {words}") for n in notes), notes
    assert any("rank 1, 2, 3 missing" in n for n in notes), notes


@pytest.mark.parametrize("filler", [b"\0", b" "], ids=["zeros", "whitespace"])
def test_a_gzip_bomb_is_refused_by_its_inflated_size(filler: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2 MB gzip of 2 GiB of zeros took 6.2 GB (1 MB of gzipped whitespace: 3.1 GB). A gzip trace may
    inflate to MAX_INFLATE_RATIO × its size (floor MIN_INFLATED_BYTES, lowered here so the cap triggers
    on a small file): the stream is refused once it passes that, whatever follows."""
    from gpudoctor.trace import gunzip

    monkeypatch.setattr(gunzip, "MIN_INFLATED_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    bomb.write_bytes(gzip.compress(b'{"traceEvents": [' + filler * (32 << 20), 9))
    assert bomb.stat().st_size * gunzip.MAX_INFLATE_RATIO < 32 << 20
    code, _, err = _analyze(capsys, str(bomb))
    sentence = _one_sentence(err)
    assert code == 2 and "it inflates to more than" in sentence and "a gzip bomb, not a trace" in sentence


def test_a_gzip_trace_below_the_ratio_reads_whole(tmp_path: Path, trace_file: Callable[[str], Path],
                                                  capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap does not touch a real trace (18× here), read through many small inflate pieces."""
    from gpudoctor.trace import gunzip

    monkeypatch.setattr(gunzip, "MIN_INFLATED_BYTES", 1 << 16)
    monkeypatch.setattr(gunzip, "_OUT_BLOCK", 4096)  # every piece full: zlib's held-back output is fetched
    code, out, err = _analyze(capsys, str(trace_file("h200/loader_bound.json.gz")), "--format", "json")
    assert code in (0, 1) and not err
    assert "GD102" in [f["code"] for f in json.loads(out)["findings"]]


def test_a_report_from_an_earlier_run_in_the_folder_may_be_rewritten(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    _kineto(tmp_path / "rank-0.json", _steps())
    report = tmp_path / "report.json"
    for _ in range(2):  # the second run reads report.json (not a trace: skipped) and writes it again
        code, _, err = _analyze(capsys, str(tmp_path), "--format", "json", "-o", str(report))
        assert code in (0, 1) and not err
    assert "findings" in json.loads(report.read_text())
