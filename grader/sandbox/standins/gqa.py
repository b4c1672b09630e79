"""Stand-in for grouped_query_attention: repeat_kv, GroupedQueryAttention, on the implementation's parts."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    return torch.repeat_interleave(x, n_rep, dim=1)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if d_model % n_heads or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"GroupedQueryAttention needs n_heads | d_model and n_kv_heads | n_heads, "
                             f"got {d_model}, {n_heads}, {n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope=None, cache=None) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("a mask cannot be given together with a cache")
        B, T, _ = x.shape
        q = self.w_q(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)
        if rope is not None:
            start = 0 if cache is None else len(cache)
            positions = torch.arange(start, start + T, device=x.device)
            q, k = (impl.rope.apply_rope(t, rope[0], rope[1], positions) for t in (q, k))
        if cache is not None:
            k, v = cache.update(k, v)
            mask = torch.ones(T, k.shape[-2], dtype=torch.bool, device=x.device).tril(k.shape[-2] - T)
        n_rep = self.n_heads // self.n_kv_heads
        k, v = (torch.repeat_interleave(t, n_rep, dim=1) for t in (k, v))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, self.d_model))
