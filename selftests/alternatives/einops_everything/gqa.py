"""Alternative: grouped-query attention with einops; the groups broadcast against one key/value head, unrepeated."""
from __future__ import annotations

from typing import TYPE_CHECKING

import einops
import torch
import torch.nn as nn
from einops import rearrange
from torch import Tensor

from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    return einops.repeat(x, "b kv t d -> b (kv rep) t d", rep=n_rep)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if n_kv_heads < 1:
            raise ValueError("n_kv_heads must be at least 1")
        if d_model % n_heads or n_heads % n_kv_heads:
            raise ValueError("n_heads must divide d_model and n_kv_heads must divide n_heads")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        if mask is not None and cache is not None:
            raise ValueError("a cache brings its own causal mask")
        start = len(cache) if cache is not None else 0
        q = rearrange(self.w_q(x), "b t (h d) -> b h t d", h=self.n_heads)
        k = rearrange(self.w_k(x), "b t (h d) -> b h t d", h=self.n_kv_heads)
        v = rearrange(self.w_v(x), "b t (h d) -> b h t d", h=self.n_kv_heads)
        if rope is not None:
            positions = torch.arange(start, start + x.shape[1], device=x.device)
            q = apply_rope(q, rope[0], rope[1], positions)
            k = apply_rope(k, rope[0], rope[1], positions)
        if cache is not None:
            k, v = cache.update(k, v)
            rows = torch.arange(x.shape[1], device=x.device)[:, None] + start
            mask = torch.arange(k.shape[2], device=x.device)[None, :] <= rows
        # (b, kv, 1, s, d) broadcasts over the rep query heads of each group
        q = rearrange(q, "b (kv rep) t d -> b kv rep t d", kv=self.n_kv_heads)
        scores = einops.einsum(q, k, "b kv rep t d, b kv s d -> b kv rep t s") / self.d_k ** 0.5
        if mask is not None:
            full = mask.expand(x.shape[0], self.n_heads, x.shape[1], k.shape[2])
            full = rearrange(full, "b (kv rep) t s -> b kv rep t s", kv=self.n_kv_heads)
            scores = torch.where(full, scores, float("-inf"))
        weights = scores.softmax(dim=-1)
        out = einops.einsum(weights, v, "b kv rep t s, b kv s d -> b t kv rep d")
        return self.out_proj(rearrange(out, "b t kv rep d -> b t (kv rep d)"))
