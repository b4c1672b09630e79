"""Alternative in the seed article's style: masked_fill(~mask, -1e9), q scaled first."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    b, t, d = x.size()
    if d % n_heads != 0:
        raise ValueError("d_model is not divisible by n_heads")
    return x.view(b, t, n_heads, d // n_heads).permute(0, 2, 1, 3)


def merge_heads(x: Tensor) -> Tensor:
    b, h, t, dh = x.size()
    return x.transpose(1, 2).contiguous().view(b, t, h * dh)


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    d = q.size(-1)
    return (q * d**-0.5).matmul(k.transpose(-1, -2))


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    if k_len is None:
        k_len = q_len
    if k_len < q_len:
        raise ValueError("k_len must not be smaller than q_len")
    future = torch.triu(torch.ones(q_len, k_len), diagonal=k_len - q_len + 1)
    return (future == 0).to(device)  # built on the CPU, then moved: wasteful on a GPU, but correct


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    if mask is not None:
        scores = scores.masked_fill(~mask, -1e9)
    return scores


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    scores = attention_scores(q, k)
    scores = apply_mask(scores, mask)
    p_attn = scores.softmax(dim=-1)
    return p_attn.matmul(v), p_attn


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model ({d_model}) % n_heads ({n_heads}) != 0")
        self.d_k = d_model // n_heads
        self.n_heads = n_heads
        self.d_model = d_model
        for name in ("w_q", "w_k", "w_v", "out_proj"):
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))
        self.last_attention = None

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return tuple(layer(x) for layer in (self.w_q, self.w_k, self.w_v))

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        q, k, v = self.project_qkv(x)
        q = split_heads(q, self.n_heads)
        k = split_heads(k, self.n_heads)
        v = split_heads(v, self.n_heads)
        if cache is not None:
            if mask is not None:
                raise ValueError("mask and cache are mutually exclusive")
            past = len(cache)
            k, v = cache.update(k, v)
            mask = causal_mask(x.size(1), past + x.size(1), device=x.device)
        out, attn = scaled_dot_product_attention(q, k, v, mask=mask)
        self.last_attention = attn.detach()
        return self.out_proj(merge_heads(out))
