"""Alternative: grouped-query attention as a Python loop over the key/value groups.

Each group's query heads attend to its one key/value head through the (student's) attention.py
scaled_dot_product_attention, which broadcasts the single head; repeat_kv by concatenation.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask, merge_heads, scaled_dot_product_attention, split_heads
from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    copies = []
    for head in range(x.shape[1]):
        copies += [x[:, head:head + 1]] * n_rep
    return torch.cat(copies, dim=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        if n_kv_heads <= 0 or n_heads % n_kv_heads != 0:
            raise ValueError("n_kv_heads must be a positive divisor of n_heads")
        self.d_model = d_model
        self.n_heads = n_heads
        self.n_kv_heads = n_kv_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, self.d_k * n_kv_heads, bias=bias)
        self.w_v = nn.Linear(d_model, self.d_k * n_kv_heads, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("mask and cache are mutually exclusive")
        q = split_heads(self.w_q(x), self.n_heads)
        k = split_heads(self.w_k(x), self.n_kv_heads)
        v = split_heads(self.w_v(x), self.n_kv_heads)
        if rope is not None:
            cos, sin = rope
            offset = 0 if cache is None else len(cache)
            positions = torch.arange(x.shape[1], device=x.device) + offset
            q = apply_rope(q, cos, sin, positions)
            k = apply_rope(k, cos, sin, positions)
        if cache is not None:
            k, v = cache.update(k, v)
            mask = causal_mask(x.shape[1], k.shape[2], device=x.device)
        group = self.n_heads // self.n_kv_heads
        outs = []
        for g in range(self.n_kv_heads):
            heads = slice(g * group, (g + 1) * group)
            group_mask = mask
            if mask is not None and mask.dim() == 4 and mask.shape[1] != 1:
                group_mask = mask[:, heads]
            out, _ = scaled_dot_product_attention(q[:, heads], k[:, g:g + 1], v[:, g:g + 1], group_mask)
            outs.append(out)
        return self.out_proj(merge_heads(torch.cat(outs, dim=1)))
