"""GD805 warns only where the file that switches an NCCL transport off asks for the hardware it uses.

The corpus had 15 false GD805 warnings: DeepSpeed launch scripts written for Ethernet clusters
(``NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0 deepspeed …``) and a CI script that turns NVLink SHARP
off. The switch costs bandwidth only where InfiniBand (or several GPUs per node) is there to lose.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from static_helpers import check_findings

from gpudoctor.model import Severity
from gpudoctor.static.sites import FileResult
from gpudoctor.static.transportneeds import gpus_requested, rdma_requested


def _gd805(path: Path) -> list[tuple[int, Severity]]:
    return [(f.location.line or 0, f.severity) for f in check_findings([path]) if f.code == "GD805"]


def test_ib_disabled_on_an_ethernet_cluster_is_info(tmp_path: Path) -> None:
    script = tmp_path / "run_ethernet.sh"
    script.write_text(
        "#!/bin/bash\n"
        "# NCCL_IB_DISABLE=1 is used to disable infiniband on our eth0 cluster\n"
        "NCCL_IB_DISABLE=1 NCCL_SOCKET_IFNAME=eth0 deepspeed --num_gpus 8 train.py --deepspeed_config ds.json\n")
    assert _gd805(script) == [(3, Severity.INFO)]


def test_ib_disabled_in_a_pod_that_requests_rdma_devices_warns(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: train}\nspec:\n  template:\n    spec:\n"
        "      containers:\n        - name: trainer\n          image: nvcr.io/nvidia/pytorch:24.05-py3\n"
        "          env:\n            - name: NCCL_IB_DISABLE\n              value: \"1\"\n"
        "          resources:\n            limits:\n              nvidia.com/gpu: 8\n"
        "              rdma/rdma_shared_device_a: 1\n")
    assert _gd805(manifest) == [(11, Severity.WARNING)]


def test_p2p_disabled_warns_with_several_gpus_per_node_and_is_info_on_one(tmp_path: Path) -> None:
    several = tmp_path / "multi.sh"
    several.write_text("export NCCL_P2P_DISABLE=1\ntorchrun --nproc_per_node=8 train.py\n")
    single = tmp_path / "single.sh"
    single.write_text("export NCCL_P2P_DISABLE=1\ntorchrun --nproc_per_node=1 train.py\n")
    assert _gd805(several) == [(1, Severity.WARNING)]
    assert _gd805(single) == [(1, Severity.INFO)]


def test_nvls_off_in_a_script_that_names_no_launcher_count_is_info(tmp_path: Path) -> None:
    script = tmp_path / "ci.sh"
    script.write_text("NCCL_NVLS_ENABLE=0 python -m tests.integration.run --ngpu 8 out/\n")
    assert _gd805(script) == [(1, Severity.INFO)]


@pytest.mark.parametrize(("text", "gpus"), [
    ("docker run --gpus all img python t.py\n", -1),
    ("docker run --gpus '\"device=0,1\"' img\n", 2),
    ("deepspeed --num_gpus=4 t.py\n", 4),
    ("mpirun -n 32 -npernode 8 python t.py\n", 8),
    ("CUDA_VISIBLE_DEVICES=0,1,2,3 python t.py\n", 4),
    ("deepspeed --num_gpus $NGPU t.py\n", 0),
    ("# torchrun --nproc_per_node 8 t.py\npython t.py\n", 0),
    ("#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\nsrun python t.py\n", 8),
    ("#SBATCH --gres=gpu:a100:4\nsrun python t.py\n", 4),
    ("services:\n  t:\n    deploy:\n      resources:\n        reservations:\n          devices:\n"
     "            - driver: nvidia\n              count: all\n", -1),
])
def test_gpus_requested(text: str, gpus: int) -> None:
    assert gpus_requested(FileResult(path="x", kind="shell"), text) == gpus


def test_rdma_requested_reads_devices_not_comments() -> None:
    assert rdma_requested("docker run --device=/dev/infiniband/uverbs0 img\n")
    assert rdma_requested("export NCCL_IB_HCA=mlx5_0,mlx5_1\n")
    assert not rdma_requested("# disable infiniband: /dev/infiniband is absent here\nexport NCCL_IB_DISABLE=1\n")
    assert not rdma_requested("mpirun --mca btl ^openib -x NCCL_IB_DISABLE=1 python t.py\n")
