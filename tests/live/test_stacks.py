"""py-spy output → main-thread activity shares, on real recorded py-spy data and a real process."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpudoctor.live import stacks

DATA = Path(__file__).resolve().parents[1] / "data" / "live"


def test_loader_bound_recording_is_mostly_data_loading() -> None:
    # py-spy record --format raw of a DataLoader-bound resnet loop on an H200 (no thread ids).
    sample = stacks.parse_raw((DATA / "pyspy_loader.txt").read_text(), read_sources=False)
    assert sample.samples > 200
    assert sample.share_pct["data_loading"] > 80
    assert sample.top_frames[0][0].endswith("SlowSet.__getitem__")


def test_compute_recording_has_no_data_loading_and_sees_synchronize() -> None:
    sample = stacks.parse_raw((DATA / "pyspy_fp32.txt").read_text(), read_sources=False)
    assert sample.share_pct["data_loading"] < 5
    assert sample.share_pct["forward"] > 30
    # the workload calls torch.cuda.synchronize() every step: py-spy sees that Python frame
    assert sample.share_pct["host_sync"] > 20
    assert sum(sample.share_pct.values()) == pytest.approx(100, abs=0.5)


def test_thread_ids_select_the_main_thread_and_source_lines_reveal_item(tmp_path: Path) -> None:
    src = tmp_path / "train.py"
    src.write_text("def step():\n    loss = model(x)\n    print(loss.item())\n")
    raw = (
        f"thread (100): MainThread;<module> ({src}:9);step ({src}:3) 30\n"
        f"thread (100): MainThread;<module> ({src}:9);step ({src}:2) 10\n"
        f"thread (101): Thread-1;run (threading.py:1) 500\n"
    )
    sample = stacks.parse_raw(raw, pid=100)
    assert sample.samples == 40
    assert sample.share_pct["host_sync"] == 75.0
    assert sample.share_pct["other"] == 25.0


def test_missing_process_is_one_sentence() -> None:
    with pytest.raises(stacks.PySpyUnavailable) as info:
        stacks.record_window(2**22 + 12345, 1.0)
    assert "\n" not in str(info.value)


def test_agent_frames_are_transparent_unless_the_agent_itself_works() -> None:
    agent = "/x/gpudoctor/agent/hooks.py"
    raw = (
        f"<module> (/t/train.py:9);_next (/x/gpudoctor/agent/hooks.py:50);"
        f"_BaseDataLoaderIter.__next__ (/v/torch/utils/data/dataloader.py:741) 60\n"
        f"<module> (/t/train.py:9);Optimizer.step (/v/torch/optim/optimizer.py:5);_post ({agent}:80);"
        f"_find_and_load (<frozen importlib._bootstrap>:1176) 40\n"
    )
    sample = stacks.parse_raw(raw, read_sources=False)
    assert sample.share_pct["data_loading"] == 60.0
    assert sample.share_pct["gpudoctor_agent"] == 40.0
