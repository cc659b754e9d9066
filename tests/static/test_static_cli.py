"""`gpudoctor check` end to end: exit codes, formats, select/ignore, config, robustness, no torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from static_helpers import DATA, GOLDEN, REPO

from gpudoctor.cli import main
from gpudoctor.static import files as static_files
from gpudoctor.static.runner import run_checks

EXAMPLES = REPO / "examples" / "check"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_examples_text_lines_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(EXAMPLES), "--color", "never")
    assert code == 1
    assert f"{EXAMPLES / 'train.py'}:39:5: GD201 " in out
    assert f"{EXAMPLES / 'Dockerfile'}:1:1: GD801 [warning] base image pytorch/pytorch:latest" in out
    assert f"{EXAMPLES / 'job.yaml'}:10:11: GD705 " in out
    assert "checked 5 file(s)" in out


def test_missing_path_is_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "/no/such/dir")
    assert code == 2 and out == ""
    assert err.strip() == "gpudoctor: /no/such/dir: no such file or directory."


def test_unsupported_file_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = run_cli(capsys, str(tmp_path / "notes.txt"))
    assert code == 2 and "not a Python file" in err


def test_select_ignore_and_fail_on(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(EXAMPLES), "--select", "GD8", "--format", "json")
    data = json.loads(out)
    assert {f["code"] for f in data["findings"]} == {"GD801", "GD802", "GD805"}
    assert code == 1
    code, out, _ = run_cli(capsys, str(EXAMPLES), "--select", "GD802", "--format", "json")
    assert code == 0 and [f["code"] for f in json.loads(out)["findings"]] == ["GD802"]  # info < warning
    code, out, _ = run_cli(capsys, str(EXAMPLES), "--ignore", "GD1,GD2,GD3,GD4,GD6,GD7,GD8", "--format", "json")
    assert code == 0 and json.loads(out)["findings"] == []
    code, _, _ = run_cli(capsys, str(EXAMPLES), "--fail-on", "critical", "--select", "GD801")
    assert code == 0


def test_config_ignore_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import torch\nstate = torch.load('x.pt')\n")
    (tmp_path / "pyproject.toml").write_text('[tool.gpudoctor]\nignore = ["GD802"]\n')
    code, out, _ = run_cli(capsys, str(script), "--format", "json", "--config", str(tmp_path / "pyproject.toml"))
    assert code == 0 and json.loads(out)["findings"] == []


def test_sarif_validates_against_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, str(EXAMPLES), "--format", "sarif")
    assert code == 1
    sarif = json.loads(out)
    schema = json.loads((DATA / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(sarif)
    run = sarif["runs"][0]
    rule_ids = [r["id"] for r in run["tool"]["driver"]["rules"]]
    result = next(r for r in run["results"] if r["ruleId"] == "GD705")
    assert rule_ids[result["ruleIndex"]] == "GD705" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 10, "startColumn": 11}
    descriptor = run["tool"]["driver"]["rules"][result["ruleIndex"]]
    assert "limits" in descriptor["help"]["markdown"]


def test_github_annotations_escape(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run_cli(capsys, str(EXAMPLES / "job.yaml"), "--format", "github")
    lines = out.splitlines()
    assert any(line.startswith(f"::error file={EXAMPLES / 'job.yaml'},line=10,col=11,title=GD705 gpu-limit-missing::")
               for line in lines)
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)


def test_robust_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "empty.py").write_bytes(b"")
    (tmp_path / "latin1.py").write_bytes(b"name = '\xe9t\xe9'\n")
    (tmp_path / "binary.py").write_bytes(b"\x00\x01\x02" * 100)
    (tmp_path / "big.py").write_bytes(b"x = 1\n" * 400)
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    (tmp_path / "ci.yaml").write_text("on: push\njobs: {}\n")
    loop = tmp_path / "loop"
    loop.mkdir()
    (loop / "again").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "dangling.py").symlink_to(tmp_path / "missing.py")
    for skipped in (".git", "node_modules", "__pycache__", ".venv"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "x.py").write_text("import torch\ntorch.load('a')\n")
    monkeypatch.setattr(static_files, "MAX_FILE_BYTES", 1000)
    code, out, err = run_cli(capsys, str(tmp_path), "--format", "json")
    assert err == ""
    data = json.loads(out)
    reasons = {Path(f["location"]["path"]).name: f["message"] for f in data["findings"]}
    assert set(reasons) == {"latin1.py", "binary.py", "big.py", "bad.yaml"}
    assert reasons["latin1.py"].startswith("not checked (not-utf8")
    assert reasons["binary.py"].startswith("not checked (binary")
    assert reasons["big.py"].startswith("not checked (too-large")
    assert data["files_checked"] == 6 and code == 1


def test_directory_without_python(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("# nothing here\n")
    code, out, _ = run_cli(capsys, str(tmp_path), "--color", "never")
    assert code == 0 and out.startswith("0 finding(s)")


def test_inline_ignore_in_yaml(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text((GOLDEN / "k8s.yaml").read_text().replace(
        "                - name: NCCL_P2P_DISABLE", "                # gpudoctor: ignore[GD805]\n"
        "                - name: NCCL_P2P_DISABLE"))
    from static_helpers import check_findings

    codes = [f.code for f in check_findings([manifest])]
    assert codes.count("GD805") == 1  # NCCL_NVLS_ENABLE=0 is still reported


def test_workers_give_the_same_result_as_one_process(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpudoctor import static

    monkeypatch.setattr("gpudoctor.static.runner.MIN_FILES_FOR_WORKERS", 1)
    one = run_checks([str(GOLDEN)], jobs=1)
    two = run_checks([str(GOLDEN)], jobs=2)
    assert [(f.scope, f.location, dict(f.values)) for f in one.factsets] == \
        [(f.scope, f.location, dict(f.values)) for f in two.factsets]
    assert static is not None


def test_check_does_not_import_torch() -> None:
    code = ("import sys; from gpudoctor.cli import main; rc = main(['check', sys.argv[1], '--env', '-o', "
            "sys.argv[2]]); assert 'torch' not in sys.modules, 'torch imported'; print(rc)")
    out = subprocess.run([sys.executable, "-c", code, str(EXAMPLES), os.devnull], capture_output=True, text=True,
                         timeout=120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


@pytest.mark.slow
def test_smoke_on_installed_torch_subset(capsys: pytest.CaptureFixture[str]) -> None:
    """Real third-party code: torch.utils (~100 files) must go through without an internal error."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed in this environment")
    root = Path(next(iter(spec.submodule_search_locations))) / "utils" / "data"
    code, out, err = run_cli(capsys, str(root), "--format", "json")
    assert code in (0, 1), err
    assert json.loads(out)["files_checked"] > 20


def test_a_checker_bug_is_reported_per_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from static_helpers import check_findings

    (tmp_path / "a.py").write_text("import torch\nstate = torch.load('x')\n")
    (tmp_path / "Dockerfile").write_text("FROM pytorch/pytorch:latest\n")

    def broken(*_args: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("gpudoctor.static.deployfile.check_dockerfile", broken)
    found = {(Path(f.location.path or "").name, f.code): f.message for f in check_findings([tmp_path])}
    assert ("a.py", "GD802") in found
    assert found[("Dockerfile", "GD899")].startswith("not checked (internal-error: KeyError")
