"""Nothing runs from the current directory: gpudoctor's child interpreters (the cuDNN probe of
``check --env``, the profile-analysis child, the injector runner, spawn workers) never import a
``json.py``/``torch.py``/... that lies in the directory gpudoctor was started from (issue 39 item 3)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpudoctor.catalog import load_catalog
from gpudoctor.isolated import python_c, python_m

PLANTED = ("json", "torch", "pickle", "runpy", "multiprocessing", "gpudoctor", "msgspec")


def _plant(where: Path) -> Path:
    marker = where / "RAN"
    for name in PLANTED:
        (where / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    return marker


@pytest.fixture()
def planted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return _plant(cwd)


def test_plain_python_c_would_run_them(planted: Path) -> None:
    """The hazard is real: a bare ``python -c 'import json'`` here runs the planted json.py."""
    subprocess.run([sys.executable, "-c", "import json"], check=True)
    assert planted.read_text() == "json\n"


def test_python_c_and_m_leave_the_cwd_off(planted: Path) -> None:
    done = subprocess.run(python_c("import json, pickle, runpy, multiprocessing\nprint(sys.path[0])"),
                          capture_output=True, text=True, check=True)
    assert not planted.exists(), planted.read_text()
    assert done.stdout.strip() not in ("", ".")
    subprocess.run(python_m("json.tool"), input="{}", capture_output=True, text=True, check=True)
    assert not planted.exists(), planted.read_text()


def test_cudnn_probe_runs_nothing_from_cwd(planted: Path) -> None:
    from gpudoctor.static.machine import cudnn_versions

    cudnn_versions()
    assert not planted.exists(), planted.read_text()


def test_profile_analysis_child_runs_nothing_from_cwd(planted: Path, trace_file: Callable[[str], Path]) -> None:
    from gpudoctor.live.profileanalysis import analyze_profile_traces

    report, why = analyze_profile_traces([str(trace_file("h200/compile_break.json.gz"))], load_catalog(), {})
    assert why is None and report is not None
    assert not planted.exists(), planted.read_text()


def test_spawn_workers_run_nothing_from_cwd(planted: Path, tmp_path: Path, trace_file: Callable[[str], Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if sys.version_info < (3, 11):
        pytest.skip("PYTHONSAFEPATH needs Python 3.11")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from trace_synth import write_rank_set

    from gpudoctor.pipeline import analyze_paths
    from gpudoctor.trace import analysis

    monkeypatch.setattr(analysis, "can_fork", lambda: False)
    write_rank_set(trace_file("h200/compile_break.json.gz"), tmp_path / "ranks", ranks=2, gzip_level=1)
    analyze_paths([tmp_path / "ranks"], jobs=2)
    assert not planted.exists(), planted.read_text()
