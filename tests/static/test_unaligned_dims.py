"""GD211 from code: a literal matrix size that is large and not a multiple of 8 (a vocabulary of 50257)."""

from __future__ import annotations

from pathlib import Path

from static_helpers import check_findings

SCRIPT = '''\
import torch
from torch import nn
from transformers import GPT2Config, GPT2LMHeadModel

config = GPT2Config(vocab_size=50257, n_layer=12)
model = GPT2LMHeadModel(config).cuda()
head = nn.Linear(768, 50257)
head2 = nn.Linear(in_features=768, out_features=32001)
classifier = nn.Linear(2048, 10)          # unaligned, and too small to matter
padded = nn.Embedding(50304, 768)         # already a multiple of 64
opt = torch.optim.AdamW(model.parameters())
for x in range(10):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = model(x).loss
    loss.backward()
    opt.step()
'''


def _gd211(tmp_path: Path, text: str) -> list[tuple[int | None, str, str]]:
    (tmp_path / "train.py").write_text(text, encoding="utf-8")
    return [(f.location.line, f.severity.value, f.message) for f in check_findings([tmp_path]) if f.code == "GD211"]


def test_large_unaligned_literal_sizes_are_named_with_their_padding(tmp_path: Path) -> None:
    found = _gd211(tmp_path, SCRIPT)
    assert [(line, sev) for line, sev, _ in found] == [(5, "info"), (7, "info"), (8, "info")]
    assert "vocab_size = 50257" in found[0][2] and "pad it to 50304" in found[0][2]
    assert "out_features = 32001" in found[2][2] and "pad it to 32064" in found[2][2]


def test_a_compiled_project_is_quiet(tmp_path: Path) -> None:
    # Inductor pads such GEMMs itself (shape_padding)
    assert _gd211(tmp_path, SCRIPT.replace("model = GPT2LMHeadModel(config).cuda()",
                                           "model = torch.compile(GPT2LMHeadModel(config).cuda())")) == []
