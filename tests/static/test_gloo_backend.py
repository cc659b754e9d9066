"""GD607 (gloo on CUDA) only where gloo carries CUDA tensors, and not where the OS leaves no choice.

Both false alarms came from pytorch/examples: ``distributed/ddp/example.py`` picks gloo under
``if sys.platform == "win32":`` (Windows has no NCCL) and NCCL elsewhere; ``distributed/rpc/batch/
parameter_server.py`` opens a gloo group for RPC and reduces nothing through it.
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

DDP_ON_GLOO = '''\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(8, 1).cuda())
'''

WINDOWS_ONLY = '''\
import sys
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if sys.platform == "win32":
    dist.init_process_group(backend="gloo", init_method="file:///tmp/x")
else:
    dist.init_process_group(backend="nccl")
model = DDP(torch.nn.Linear(8, 1).cuda())
'''

RPC_ONLY = '''\
import torch
import torch.distributed as dist
import torch.distributed.rpc as rpc

dist.init_process_group(backend="gloo", rank=0, world_size=2)
rpc.init_rpc("trainer", rank=0, world_size=2)
model = torch.nn.Linear(8, 1).cuda()
'''

COLLECTIVE_ON_GLOO = '''\
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
grad = torch.ones(4).cuda()
dist.all_reduce(grad)
'''


def _gd607(tmp_path: Path, source: str) -> int:
    script = tmp_path / "job.py"
    script.write_text(source)
    return sum(f.code == "GD607" for f in check_findings([script]))


def test_gloo_that_carries_cuda_tensors_is_found(tmp_path: Path) -> None:
    assert _gd607(tmp_path, DDP_ON_GLOO) == 1
    assert _gd607(tmp_path, COLLECTIVE_ON_GLOO) == 1


def test_gloo_chosen_for_windows_is_not_a_finding(tmp_path: Path) -> None:
    assert _gd607(tmp_path, WINDOWS_ONLY) == 0
    assert _gd607(tmp_path, WINDOWS_ONLY.replace('if sys.platform == "win32":', "if use_file_store:")) == 1


def test_a_gloo_group_for_rpc_alone_is_not_a_finding(tmp_path: Path) -> None:
    assert _gd607(tmp_path, RPC_ONLY) == 0
