"""Ranks per node and the script from a launch command, CPUs from a manifest (GD305's static block)."""

from __future__ import annotations

import pytest

from gpudoctor.static.launchranks import _match, cpu_count, rank_launch


@pytest.mark.parametrize(("command", "expected"), [
    ("torchrun --nproc_per_node=8 train.py --lr 1", ("torchrun", 8, "train.py")),
    ("python -m torch.distributed.run --nproc-per-node 2 a.py", ("torch.distributed.run", 2, "a.py")),
    ("deepspeed --num_gpus 4 main.py --deepspeed ds.json", ("deepspeed", 4, "main.py")),
    ("accelerate launch --num_processes=8 x.py", ("accelerate", 8, "x.py")),
    ("bash -c 'torchrun --nproc_per_node 8 t.py'", ("torchrun", 8, "t.py")),
    ("torchrun --nproc_per_node=$GPUS t.py", ("torchrun", -1, "t.py")),
    ("torchrun train.py", None),
    ("python train.py", None),
])
def test_rank_launch(command: str, expected: tuple[str, int, str] | None) -> None:
    assert rank_launch(command) == expected


def test_cpu_count() -> None:
    assert (cpu_count("8000m"), cpu_count("7.5"), cpu_count('"4"'), cpu_count(None), cpu_count("lots")) == \
        (8.0, 7.5, 4.0, -1.0, -1.0)


def test_the_script_is_matched_beside_the_manifest_or_by_its_trailing_path() -> None:
    paths = ["repo/train.py", "repo/tools/train.py", "repo/other.py"]
    assert _match(paths, "repo/k8s/job.yaml", "../train.py") == "repo/train.py"
    assert _match(paths, "repo/job.yaml", "/workspace/tools/train.py") == "repo/tools/train.py"
    assert _match(paths, "elsewhere/job.yaml", "/workspace/train.py") is None  # two train.py: ambiguous
    assert _match(paths, "repo/job.yaml", "missing.py") is None
