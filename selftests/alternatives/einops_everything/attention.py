"""Alternative: einops throughout; -inf masking via torch.where."""
from __future__ import annotations

from typing import TYPE_CHECKING

import einops
import torch
import torch.nn as nn
from einops import rearrange
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    d_model = x.shape[-1]
    if d_model % n_heads != 0:
        raise ValueError(f"cannot split d_model={d_model} into {n_heads} heads")
    return rearrange(x, "batch seq (heads dh) -> batch heads seq dh", heads=n_heads)


def merge_heads(x: Tensor) -> Tensor:
    return rearrange(x, "batch heads seq dh -> batch seq (heads dh)")


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    scale = q.shape[-1] ** 0.5
    return einops.einsum(q, k, "... q d, ... k d -> ... q k") / scale


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    if k_len is None:
        k_len = q_len
    if k_len < q_len:
        raise ValueError(f"k_len={k_len} < q_len={q_len}")
    offset = k_len - q_len
    i = rearrange(torch.arange(q_len, device=device), "i -> i 1")
    j = rearrange(torch.arange(k_len, device=device), "j -> 1 j")
    return (j - i) <= offset


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return scores
    neg_inf = torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device)
    return torch.where(mask, scores, neg_inf)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    weights = torch.softmax(apply_mask(attention_scores(q, k), mask), dim=-1)
    out = einops.einsum(weights, v, "... q k, ... k d -> ... q d")
    return out, weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"n_heads={n_heads} does not divide d_model={d_model}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias)
        self.w_k = nn.Linear(d_model, d_model, bias)
        self.w_v = nn.Linear(d_model, d_model, bias)
        self.out_proj = nn.Linear(d_model, d_model, bias)
        self.last_attention: Tensor | None = None

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)
        return (q, k, v)

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        if mask is not None and cache is not None:
            raise ValueError("got both a mask and a cache")
        q, k, v = self.project_qkv(x)
        q = rearrange(q, "b t (h d) -> b h t d", h=self.n_heads)
        k = rearrange(k, "b t (h d) -> b h t d", h=self.n_heads)
        v = rearrange(v, "b t (h d) -> b h t d", h=self.n_heads)
        if cache is not None:
            k, v = cache.update(k, v)
            mask = causal_mask(q.shape[-2], k.shape[-2], device=q.device)
        scores = einops.einsum(q, k, "b h i d, b h j d -> b h i j") / self.d_k**0.5
        if mask is not None:
            scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
        weights = scores.softmax(-1)
        self.last_attention = weights.detach()
        out = einops.einsum(weights, v, "b h i j, b h j d -> b h i d")
        return self.out_proj(rearrange(out, "b h t d -> b t (h d)"))
