"""GD212 golden fixture: hand-written attention in nn.Module classes (nanoGPT's and Hugging Face GPT-2's
shapes of it), and attention that is already fused or is no attention (must not fire)."""
import math

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):  # nanoGPT's model.py with flash off
    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return y


class HFAttention(nn.Module):  # transformers' eager GPT-2 attention
    def _attn(self, query, key, value, causal_mask):
        attn_weights = torch.matmul(query, key.transpose(-1, -2))
        attn_weights = attn_weights / torch.full([], value.size(-1) ** 0.5)
        attn_weights = torch.where(causal_mask, attn_weights, torch.finfo(attn_weights.dtype).min)
        attn_weights = nn.functional.softmax(attn_weights, dim=-1)
        attn_output = torch.matmul(attn_weights, value)
        return attn_output


def one_line(q, k, v):
    return torch.softmax(q @ k.mT / 8.0, dim=-1) @ v


def padded(q, k, v, pad_mask):  # a padding mask, not causal: the fix passes it as attn_mask
    s = q @ k.transpose(-2, -1)
    s = s.masked_fill(pad_mask, -1e4)
    return F.softmax(s, dim=-1) @ v


class Fused(nn.Module):  # already fused: nothing to say
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def classifier_head(h, w, labels):  # a softmax over logits, then a matmul that reads no scores
    logits = h @ w.transpose(0, 1)
    loss = F.cross_entropy(logits, labels)
    probs = F.log_softmax(logits, dim=-1)
    return loss, probs @ w


model = CausalSelfAttention().cuda()  # the program puts this model on the GPU (gpu_job)
