"""Alternative: grouped-query attention with keys and values expanded per group (a view, no copy until the
reshape), its own softmax attention with masked scores at -1e9, heads split by permute."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask
from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    return x.unsqueeze(2).expand(-1, -1, n_rep, -1, -1).flatten(1, 2)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if d_model % n_heads:
            raise ValueError(f"d_model={d_model} is not a multiple of n_heads={n_heads}")
        if n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads}")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, n_heads * self.d_k, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(n_heads * self.d_k, d_model, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("no mask with a cache: the cache is causal by itself")
        batch, length, _ = x.shape

        def split(t: Tensor, n: int) -> Tensor:
            return t.view(batch, length, n, self.d_k).permute(0, 2, 1, 3)

        q = split(self.w_q(x), self.n_heads)
        k, v = split(self.w_k(x), self.n_kv_heads), split(self.w_v(x), self.n_kv_heads)
        if rope is not None:
            positions = (0 if cache is None else len(cache)) + torch.arange(length, device=x.device)
            q = apply_rope(q, *rope, positions)
            k = apply_rope(k, *rope, positions)
        if cache is not None:
            k, v = cache.update(k, v)
            mask = causal_mask(length, k.size(-2), device=x.device)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask.logical_not(), -1e9)
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out_proj(out.permute(0, 2, 1, 3).reshape(batch, length, self.d_model))
