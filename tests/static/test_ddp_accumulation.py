"""GD605: accumulation that all-reduces every micro-step, told from alternating optimizers and apex DDP.

The corpus had a false GD605 on a warm-up loop that steps one optimizer when ``step % 2 == 0`` and
all of them otherwise (some optimizer steps on every iteration: no accumulation), and four warnings on
scripts whose DDP is apex's, which has no ``no_sync()`` to use (true, but the fix is a port: info).
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

from gpudoctor.model import Severity

_HEAD = """\
import torch
import torch.distributed as dist
{ddp_import}

dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(8, 8).cuda())
opt_a = torch.optim.AdamW(model.parameters())
opt_b = torch.optim.SGD(model.parameters(), lr=0.1)
accum = 4
"""


def _gd605(tmp_path: Path, loop: str, ddp_import: str = "from torch.nn.parallel import DistributedDataParallel as DDP"
           ) -> list[tuple[int, Severity]]:
    script = tmp_path / "train.py"
    script.write_text(_HEAD.format(ddp_import=ddp_import) + loop)
    return [(f.location.line or 0, f.severity) for f in check_findings([script]) if f.code == "GD605"]


_ACCUMULATES = """\
for step in range(1000):
    x = torch.randn(32, 8, device="cuda")
    model(x).sum().backward()
    if (step + 1) % accum == 0:
        opt_a.step()
        opt_a.zero_grad()
"""


def test_periodic_step_under_torch_ddp_warns(tmp_path: Path) -> None:
    assert _gd605(tmp_path, _ACCUMULATES) == [(14, Severity.WARNING)]


def test_optimizers_stepped_in_both_branches_are_no_accumulation(tmp_path: Path) -> None:
    alternating = """\
for step in range(1000):
    x = torch.randn(32, 8, device="cuda")
    model(x).sum().backward()
    if step % 2 == 0:
        opt_b.step()
        opt_b.zero_grad()
    else:
        for opt in (opt_a, opt_b):
            opt.step()
        model.zero_grad()
"""
    assert _gd605(tmp_path, alternating) == []


def test_an_else_that_only_logs_is_still_accumulation(tmp_path: Path) -> None:
    logs = _ACCUMULATES + "    else:\n        print('micro-step', step)\n"
    assert _gd605(tmp_path, logs) == [(14, Severity.WARNING)]


def test_accumulation_under_apex_ddp_is_info(tmp_path: Path) -> None:
    apex = "from apex.parallel import DistributedDataParallel as DDP"
    assert _gd605(tmp_path, _ACCUMULATES, ddp_import=apex) == [(14, Severity.INFO)]
