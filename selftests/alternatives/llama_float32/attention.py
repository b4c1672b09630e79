"""Correct alternative: the attention weights in float32 whatever the dtype, as Meta's LLaMA computes them.

The softmax runs on `scores.float()` and is cast back with `.type_as(q)`; the rest is the reference."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
import torch.nn.functional as F
from einops import rearrange
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """(B, T, D) -> (B, H, T, D // H); head h holds features h*Dh .. (h+1)*Dh - 1."""
    if x.size(-1) % n_heads != 0:
        raise ValueError(f"d_model={x.size(-1)} is not divisible by n_heads={n_heads}")
    return rearrange(x, "b t (h d) -> b h t d", h=n_heads)


def merge_heads(x: Tensor) -> Tensor:
    """(B, H, T, Dh) -> (B, T, H * Dh), the inverse of split_heads."""
    return rearrange(x, "b h t d -> b t (h d)")


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """q (..., Tq, d), k (..., Tk, d) -> (..., Tq, Tk) = q k^T / sqrt(d)."""
    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    """Bool (q_len, k_len), True where query i may attend key j: j <= i + (k_len - q_len)."""
    k_len = q_len if k_len is None else k_len
    if k_len < q_len:
        raise ValueError(f"k_len={k_len} must be at least q_len={q_len}")
    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)
    return ones.tril(diagonal=k_len - q_len)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Scores with -inf wherever the (broadcastable, bool) mask is False."""
    if mask is None:
        return scores
    return scores.masked_fill(~mask, float("-inf"))


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """q (..., Tq, d), k (..., Tk, d), v (..., Tk, dv) -> out (..., Tq, dv), weights (..., Tq, Tk)."""
    scores = apply_mask(attention_scores(q, k), mask)
    # Meta's llama/model.py: F.softmax(scores.float(), dim=-1).type_as(xq)
    weights = F.softmax(scores.float(), dim=-1).type_as(q)
    return weights @ v, weights


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention over (B, T, D) inputs, with an optional KV cache."""

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
        self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attention: Tensor | None = None

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(B, T, D) -> q, k, v, each (B, T, D)."""
        return self.w_q(x), self.w_k(x), self.w_v(x)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        """(B, T, D) -> (B, T, D). With a cache, x holds the next T positions."""
        q, k, v = (split_heads(t, self.n_heads) for t in self.project_qkv(x))
        if cache is not None:
            if mask is not None:
                raise ValueError("pass either a mask or a cache, not both: the cache implies a causal mask")
            k, v = cache.update(k, v)
            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        self.last_attention = weights.detach()
        return self.out_proj(merge_heads(out))
