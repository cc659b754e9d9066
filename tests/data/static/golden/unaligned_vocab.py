"""A GPT-style model whose vocabulary (50257) is not a multiple of 8, trained eagerly in bf16."""
import torch
from torch import nn


class TinyLM(nn.Module):
    def __init__(self, vocab_size=50257, dim=768):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim)
        self.head = nn.Linear(dim, 50257, bias=False)

    def forward(self, ids):
        return self.head(self.embed(ids))


model = TinyLM().cuda()
opt = torch.optim.AdamW(model.parameters(), fused=True)
ids = torch.randint(0, 50257, (8, 1024), device="cuda")
for step in range(100):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
