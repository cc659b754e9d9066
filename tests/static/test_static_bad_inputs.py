"""`gpudoctor check` on files it cannot analyse (issue 15): reported by name, exit 2, never "checked 0 files".

Each case is a reproduction: a named file that is not UTF-8, over the size limit, a FIFO, a symlink to
/dev/zero, or unreadable used to exit 0 (or hang, for the FIFO).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpudoctor.cli import main
from gpudoctor.static import files as static_files


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["check", "--format", "json", *argv])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def _make(tmp_path: Path, kind: str) -> Path:
    path = tmp_path / "train.py"
    if kind == "not-utf8":
        path.write_bytes(b"x = '\xff\xfe'\n")
    elif kind == "too-large":
        path.write_bytes(b"x = 1\n" * 400)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    return path


@pytest.mark.parametrize(("kind", "reason"), [("not-utf8", "not-utf8"), ("too-large", "too-large"),
                                              ("fifo", "not-regular"), ("dev-zero", "not-regular")])
def test_named_file_that_cannot_be_analysed_exits_2_and_is_reported(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        kind: str, reason: str) -> None:
    monkeypatch.setattr(static_files, "MAX_FILE_BYTES", 1000)
    path = _make(tmp_path, kind)
    good = tmp_path / "good.py"
    good.write_text("x = 1\n")
    code, data, err = _check(capsys, str(path), str(good))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith(f"gpudoctor: could not check {path} ({reason}: ")
    [finding] = [f for f in data["findings"] if f["code"] == "GD899"]
    assert finding["location"]["path"] == str(path) and reason in finding["message"]
    assert data["files_checked"] == 2  # the other file was still checked


def test_fifo_in_a_walked_directory_does_not_hang_or_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "ok.py").write_text("x = 1\n")
    code, data, _ = _check(capsys, str(tmp_path))
    assert code == 0 and data["files_checked"] == 1


def test_pep263_coding_line_is_honoured(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "latin.py"
    path.write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n")
    code, data, _ = _check(capsys, str(path))
    assert code == 0 and not data["findings"]


def test_symlink_loop_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop.py"
    loop.symlink_to(loop)
    assert main(["check", str(loop)]) == 2
    assert "symlink loop" in capsys.readouterr().err


def test_unreadable_named_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # /proc/self/mem is a regular file whose read at offset 0 fails (EIO) even for root, unlike chmod 000.
    path = tmp_path / "train.py"
    path.symlink_to("/proc/self/mem")
    code, data, err = _check(capsys, str(path))
    assert code == 2
    assert err.startswith(f"gpudoctor: could not check {path} (unreadable: ") and err.count("\n") == 1
    assert [f["code"] for f in data["findings"]] == ["GD899"]


def test_yaml_alias_bomb_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import time

    # 1.3 KB: ten mappings per level, eleven levels of aliases — visiting every path is 10^11 nodes (hung).
    lines = ["a0: &a0 {x: 1, y: 2, z: 3}"]
    for level in range(1, 12):
        lines.append(f"a{level}: &a{level} {{" + ", ".join(f"k{j}: *a{level - 1}" for j in range(10)) + "}")
    lines.append("apiVersion: v1\nkind: Pod\nspec: *a11\n")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines))
    # One list aliased into every compose service: 3000 x 3000 items.
    env = tmp_path / "compose.yaml"
    env.write_text("x-env: &env [" + ", ".join(f"NCCL_V{i}=1" for i in range(3000)) + "]\nservices:\n" +
                   "".join(f"  s{i}: {{environment: *env}}\n" for i in range(3000)))
    started = time.perf_counter()
    code, data, _ = _check(capsys, str(bomb), str(env))
    assert time.perf_counter() - started < 15  # was unbounded; about 1 s here
    assert code == 1  # the env file was not checked: GD899 is a warning, --fail-on warning fails
    mine = [f for f in data["findings"] if f["location"]["path"] == str(env)]
    assert {f["code"] for f in mine} == {"GD899"}
    assert "too-complex" in {f["location"]["label"] for f in mine}


def test_deep_yaml_without_libyaml_is_a_yaml_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import yaml

    from gpudoctor.static import manifests
    from gpudoctor.static.sites import FileResult

    monkeypatch.setattr(manifests, "_Loader", yaml.SafeLoader)  # the pure-Python fallback recurses per level
    result = FileResult(path="deep.yaml", kind="yaml")
    manifests.check_yaml(result, "a: " + "[" * 3000 + "]" * 3000 + "\n")
    assert [(s.values["reason"], s.values["detail"]) for s in result.sites] == [("yaml-error", "nested too deeply")]


def test_a_python_file_above_its_limit_is_not_parsed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 7.9 MiB Python file took 41 s and 1.4 GB; Python files have their own, lower limit."""
    folder = tmp_path / "src"
    folder.mkdir()
    big = folder / "generated.py"
    big.write_bytes(b"x = 1\n" * (static_files.MAX_PYTHON_BYTES // 6 + 1))
    (folder / "train.py").write_text("import torch\n")
    assert static_files.MAX_PYTHON_BYTES < big.stat().st_size < static_files.MAX_FILE_BYTES
    code, data, _ = _check(capsys, str(folder))
    [finding] = [f for f in data["findings"] if f["location"]["path"] == str(big)]
    assert finding["code"] == "GD899" and "too-large" in finding["message"] and "1.0 MiB" in finding["message"]
    assert code == 1  # a file that was not checked fails the default --fail-on warning


def test_gd899_is_reported_whatever_select_says(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--select GD1`` hid GD899: an unreadable file vanished from the report and check exited 0."""
    (tmp_path / "bad.py").write_text("def f(:\n")
    code, data, _ = _check(capsys, "--select", "GD1", str(tmp_path))
    assert code == 1 and [f["code"] for f in data["findings"]] == ["GD899"]
    code, data, _ = _check(capsys, "--select", "GD1", "--ignore", "GD899", str(tmp_path))
    assert code == 0 and data["findings"] == []


def test_a_file_too_deep_to_parse_fails_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that hit RecursionError/MemoryError in the parser was "not checked" (info) and check exited 0."""
    (tmp_path / "deep.py").write_text("x = " + "-" * 100_000 + "1\n")
    code, data, _ = _check(capsys, str(tmp_path))
    assert [f["code"] for f in data["findings"]] == ["GD899"] and data["findings"][0]["severity"] == "warning"
    assert code == 1
    assert main(["check", "--fail-on", "critical", str(tmp_path)]) == 0  # the policy is --fail-on's
    capsys.readouterr()


def test_files_in_a_folder_that_are_not_regular_are_noted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A FIFO, device, broken link or symlink loop named like a checked file was skipped with no note."""
    (tmp_path / "train.py").write_text("import torch\n")
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "loop.py").symlink_to("loop.py")
    (tmp_path / "gone.yaml").symlink_to("nowhere.yaml")
    code, data, _ = _check(capsys, str(tmp_path))
    [note] = [n for n in data["notes"] if n.startswith("skipped 4 file(s) that are not regular files: ")]
    for name, what in (("gone.yaml", "a broken symbolic link"), ("loop.py", "a symlink loop"),
                       ("pipe.py", "a FIFO"), ("zero.py", "a character device")):
        assert f"{tmp_path / name} ({what})" in note, note
    assert code == 0


def test_a_manifest_of_5000_documents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """5,000 Kubernetes documents: IndexError (exit 70) in the per-file site cap, which counted error sites."""
    pod = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p{i}}}\nspec:\n  containers:\n  - {{name: c, image: 'pytorch/pytorch:latest'}}\n"
    manifest = tmp_path / "pods.yaml"
    manifest.write_text("---\n".join(pod.format(i=i) for i in range(5000)))
    code, data, err = _check(capsys, str(manifest))
    assert code in (0, 1) and not err
    assert any(f["code"] == "GD899" for f in data["findings"])


@pytest.mark.parametrize(("args", "shown"), [
    ("ARG A=latest\nARG C=${B:-${A}}\n", "pytorch/pytorch:latest"),
    ("ARG A=latest\nARG C=${X:-${Y:-${A}}}\n", "pytorch/pytorch:latest"),
    ("ARG C=${B:-${A}}\n", None),  # nothing known: a variable, not a verdict
])
def test_nested_arg_defaults_reach_from(args: str, shown: str | None, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """``ARG C=${B:-${A}}`` then ``FROM image:${C}`` hid an unpinned base image."""
    (tmp_path / "Dockerfile").write_text(args + "FROM pytorch/pytorch:${C}\n")
    _, data, _ = _check(capsys, str(tmp_path))
    found = [f["message"] for f in data["findings"] if f["code"] == "GD801"]
    assert (found and shown in found[0]) if shown else not found


def test_shell_heredoc_text_is_not_an_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A launch script writing ``export NCCL_P2P_DISABLE=1`` into a file through a heredoc got GD805."""
    script = tmp_path / "launch.sh"
    script.write_text("#!/bin/bash\ncat > env.sh <<EOF\nexport NCCL_P2P_DISABLE=1\nEOF\n"
                      "cat <<-'END' >> x\n\texport NCCL_IB_DISABLE=1\n\tEND\nexport NCCL_SHM_DISABLE=1\n")
    _, data, _ = _check(capsys, str(script))
    lines = [f["location"]["line"] for f in data["findings"] if f["code"] == "GD805"]
    assert lines == [8]  # the real export after the heredocs, only
