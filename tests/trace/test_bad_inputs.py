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
    assert code == 2 and "holds no .json or .json.gz trace files" in _one_sentence(err)


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
