"""GD212 (static): hand-written attention that is only the fallback of a fused path, and window attention.

nanoGPT's ``CausalSelfAttention.forward`` calls ``F.scaled_dot_product_attention`` when ``self.flash``
and writes the chain only for PyTorch < 2.0; litgpt writes it only for logit soft-capping, which SDPA
cannot do. Neither is a warning. Swin's attention within 7×7 windows has 49×49 scores: info.
"""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

from gpudoctor.model import Severity

ATTENTION = '''
import math

import torch
import torch.nn.functional as F
from torch import nn


class Attention(nn.Module):
    def forward(self, q, k, v):
        {branch}
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = F.softmax(att, dim=-1)
            y = att @ v
        return y


model = Attention().cuda()
'''
FLASH_FIRST = '''if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:'''


def _gd212(tmp_path: Path, branch: str) -> list[Severity]:
    script = tmp_path / "model.py"
    script.write_text(ATTENTION.format(branch=branch))
    return [f.severity for f in check_findings([script]) if f.code == "GD212"]


def test_the_fallback_of_a_fused_path_is_no_finding(tmp_path: Path) -> None:
    assert _gd212(tmp_path, FLASH_FIRST) == []
    assert _gd212(tmp_path, "if True:") == [Severity.WARNING]
    # a method of its own named like SDPA is the hand-written code, not a fused path
    assert _gd212(tmp_path, "y = self.scaled_dot_product_attention(q, k, v)\n        if True:") == [Severity.WARNING]


def test_window_attention_is_info(tmp_path: Path) -> None:
    windowed = "bias = self.relative_position_bias_table[: self.window_size[0] ** 2]\n        if True:"
    assert _gd212(tmp_path, windowed) == [Severity.INFO]
    sliding = "mask = band(q.size(2), self.sliding_window_size)\n        if True:"
    assert _gd212(tmp_path, sliding) == [Severity.WARNING]  # a sliding window over the whole sequence
