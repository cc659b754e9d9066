"""GD308 finds constants made on the host and copied every step, not data that has to be copied."""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

LOOP = '''\
import numpy as np
import torch

model = torch.nn.Linear(8, 1).cuda()
for step in range(100):
    obs = np.zeros(8, dtype=np.float32)
    rewards = [1.0, 0.5]
    x = {expr}
    loss = model(x).sum()
    loss.backward()
'''


def _gd308(tmp_path: Path, expr: str) -> bool:
    script = tmp_path / "train.py"
    script.write_text(LOOP.format(expr=expr))
    return any(f.code == "GD308" for f in check_findings([script]))


def test_constants_made_on_the_host_are_found(tmp_path: Path) -> None:
    assert _gd308(tmp_path, "torch.tensor([1.0] * 8).cuda()")
    assert _gd308(tmp_path, "torch.zeros(8).cuda()")
    assert _gd308(tmp_path, "torch.arange(8).to('cuda')")


def test_data_the_host_holds_is_not_a_finding(tmp_path: Path) -> None:
    assert not _gd308(tmp_path, "torch.tensor(rewards).cuda()")
    assert not _gd308(tmp_path, "torch.from_numpy(obs).cuda()")
    assert not _gd308(tmp_path, "torch.stack([torch.from_numpy(obs)] * 2).cuda()")
    assert not _gd308(tmp_path, "torch.zeros(8, device='cuda')")
