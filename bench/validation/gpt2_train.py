"""A plain-PyTorch GPT-2 training loop with hand-written attention and one switch per fix (issue 35).

Why this exists: the issue's table (fp32 2.53 steps/s, TF32 2.17×, bf16 2.25×, SDPA 1.66× over bf16 …)
was measured on a script like this one; the validation (``transformer_validation.py``) applies each
switch alone to the job as it was and compares the measured gain with gpudoctor's estimate. The
attention is written as most hand-rolled GPTs write it (``softmax(q @ k.transpose(-2, -1) * scale)``
with a causal ``masked_fill``); ``--sdpa`` swaps it for ``F.scaled_dot_product_attention(..., is_causal=True)``.

    python gpt2_train.py --steps 30                      # GPT-2 124M, batch 16 x 1024, fp32, eager
    python gpt2_train.py --tf32 | --bf16 | --sdpa | --compile | --fused-adamw
    python gpt2_train.py --cpu --tiny --steps 6 --profile out.json.gz   # a small torch.profiler trace

It prints ``steps_per_s=<rate>`` over the steps after the warm-up, and with ``--profile`` writes a
torch.profiler trace of ``--profile-steps`` steps (``ProfilerStep#N`` spans) after the warm-up.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, seq_len: int, sdpa: bool) -> None:
        super().__init__()
        self.n_head, self.sdpa = n_head, sdpa
        self.qkv = nn.Linear(n_embd, 3 * n_embd)
        self.proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("mask", torch.tril(torch.ones(seq_len, seq_len, dtype=torch.bool)).view(1, 1, seq_len, seq_len))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(~self.mask[:, :, :t, :t], float("-inf"))
            att = F.softmax(att, dim=-1)
            y = att @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, seq_len: int, sdpa: bool) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(n_embd), nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, seq_len, sdpa)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int, n_layer: int, n_head: int, n_embd: int, seq_len: int, sdpa: bool) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, n_embd), nn.Embedding(seq_len, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head, seq_len, sdpa) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1), device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", action="store_true")
    p.add_argument("--tiny", action="store_true", help="2 layers, 64 wide, sequence 64, batch 4")
    p.add_argument("--batch", type=int, default=None, help="default 16 (tiny: 4)")
    p.add_argument("--seq", type=int, default=None, help="default 1024 (tiny: 64)")
    p.add_argument("--vocab", type=int, default=None, help="default 50304 (tiny: 512)")
    p.add_argument("--steps", type=int, default=30, help="measured steps after the warm-up")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--tf32", action="store_true")
    p.add_argument("--bf16", action="store_true")
    p.add_argument("--sdpa", action="store_true")
    p.add_argument("--sdpa-math", action="store_true", help="SDPA restricted to its math backend")
    p.add_argument("--compile", action="store_true")
    p.add_argument("--fused-adamw", action="store_true")
    p.add_argument("--profile", default="", help="write a torch.profiler trace here")
    p.add_argument("--profile-steps", type=int, default=3)
    a = p.parse_args(argv)
    n_layer, n_head, n_embd = (2, 2, 64) if a.tiny else (12, 12, 768)
    for key, full, tiny in (("batch", 16, 4), ("seq", 1024, 64), ("vocab", 50304, 512)):
        if getattr(a, key) is None:
            setattr(a, key, tiny if a.tiny else full)
    device = "cpu" if a.cpu or not torch.cuda.is_available() else "cuda"
    torch.backends.cuda.matmul.allow_tf32 = a.tf32
    torch.backends.cudnn.allow_tf32 = a.tf32
    torch.manual_seed(0)
    model = GPT(a.vocab, n_layer, n_head, n_embd, a.seq, a.sdpa or a.sdpa_math).to(device)
    extra = {"fused": True} if a.fused_adamw else {}
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, **extra)
    step_model = torch.compile(model) if a.compile else model
    def backend() -> Any:
        if not a.sdpa_math:
            return contextlib.nullcontext()
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return sdpa_kernel(SDPBackend.MATH)

    data = torch.randint(0, a.vocab, (a.batch, a.seq + 1), device=device)
    x, y = data[:, :-1], data[:, 1:]

    def step() -> None:
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=a.bf16), backend():
            loss = step_model(x, y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    rate = a.steps / (time.perf_counter() - t0)
    print(f"steps_per_s={rate:.4f}", flush=True)
    if a.profile:
        acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if device == "cuda" else [])
        with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=0, warmup=1, active=a.profile_steps),
                                    record_shapes=True, on_trace_ready=lambda pr: pr.export_chrome_trace(a.profile)) as prof:
            for _ in range(1 + a.profile_steps):
                step()
                sync()
                prof.step()


if __name__ == "__main__":
    main()
