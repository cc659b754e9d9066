"""bench/run.py's pieces that need no benchmark run: its table parser, headlines and README rewrite."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module
    spec.loader.exec_module(module)
    return module


OUTPUT = """prepared: rule cache warm
4 rank traces of resnet_fp32.json.gz; load average 1.0
| ranks | --jobs | wall | speedup |
|---|---|---|---|
| 4 | 1 | 1.45 s | |
| 4 | 2 | 0.80 s | 1.81× |
reports identical: True
"""


def test_tables_are_parsed_with_the_line_above_them(run: ModuleType) -> None:
    [table] = run.markdown_tables(OUTPUT)
    assert table["title"].startswith("4 rank traces")
    assert table["header"] == ["ranks", "--jobs", "wall", "speedup"]
    assert table["rows"] == [["4", "1", "1.45 s", ""], ["4", "2", "0.80 s", "1.81×"]]


def test_headlines_read_each_benchmark_s_own_result(run: ModuleType) -> None:
    assert run.headline("trace", {"tables": run.markdown_tables(OUTPUT)}) == "4 ranks --jobs 2 1.81×"
    agent = {"json": {"off_steps_per_s": [100.0, 102.0], "on_steps_per_s": [99.0, 99.0]}}
    assert run.headline("agent", agent) == "attached/detached steps/s 0.980 (99.0 / 101.0)"
    watcher = {"json": {"modes": {"full": {"ratio": 0.991}, "no-agent": {"ratio": None}}}}
    assert run.headline("watcher", watcher) == "full ratio 0.991"


def test_every_benchmark_script_exists_and_names_are_unique(run: ModuleType) -> None:
    names = [b.name for b in run.BENCHES]
    assert len(names) == len(set(names))
    for bench in run.BENCHES:
        assert (REPO / bench.script).is_file(), bench.script


def test_readme_table_is_rewritten_between_its_marks(run: ModuleType, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# B\n<!-- latest:start -->\nold\n<!-- latest:end -->\ntail\n")
    monkeypatch.setattr(run, "README", readme)
    doc: dict[str, Any] = {"date": "2026-12-06 20:00 UTC", "commit": "abc1234", "dirty": False, "quick": True,
                           "machine": {"cpus": 2, "cpu": "x", "load_start": "0.5 0.5 0.5"},
                           "benchmarks": {"agent": {"status": "skipped", "why": "needs tmux"}}}
    out = tmp_path / "latest.json"
    out.write_text(json.dumps(doc))
    assert run.main(["--readme-only", "--out", str(out)]) == 0
    text = readme.read_text()
    assert "old" not in text and text.endswith("<!-- latest:end -->\ntail\n")
    assert "| agent | skipped |  | needs tmux |" in text and "commit abc1234, --quick" in text


def test_an_unknown_benchmark_name_is_refused(run: ModuleType) -> None:
    with pytest.raises(SystemExit) as exc:
        run.main(["--only", "nosuch"])
    assert exc.value.code == 2
