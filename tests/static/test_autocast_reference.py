"""GD201 (static) counts autocast that the loop enters through a variable, as timm's train.py does."""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

TIMM_LIKE = '''\
from contextlib import suppress
from functools import partial

import torch

amp_autocast = suppress
if use_amp:
    amp_autocast = partial(torch.autocast, device_type="cuda", dtype=torch.bfloat16)
model = torch.nn.Linear(8, 1).cuda()
for x, y in loader:
    with amp_autocast():
        loss = model(x).sum()
    loss.backward()
'''


def test_partial_of_torch_autocast_is_autocast(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(TIMM_LIKE)
    assert "GD201" not in {f.code for f in check_findings([script])}
    script.write_text(TIMM_LIKE.replace("partial(torch.autocast,", "partial(dict,"))
    assert "GD201" in {f.code for f in check_findings([script])}
