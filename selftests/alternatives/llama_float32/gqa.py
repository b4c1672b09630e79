"""Correct alternative: grouped-query attention as Meta's LLaMA writes its attention (softmax in float32, cast back)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import math

import torch
import torch.nn.functional as F
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask, merge_heads, split_heads
from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """(B, Hkv, T, Dh) -> (B, Hkv * n_rep, T, Dh); output head j is input head j // n_rep."""
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    B, H, T, Dh = x.shape
    return x[:, :, None].expand(B, H, n_rep, T, Dh).reshape(B, H * n_rep, T, Dh)


class GroupedQueryAttention(nn.Module):
    """Attention whose n_heads query heads share n_kv_heads key/value heads; (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if d_model % n_heads or n_kv_heads < 1 or n_heads % n_kv_heads:
            raise ValueError(f"need n_heads | d_model and n_kv_heads | n_heads, got {d_model}, {n_heads}, {n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads = d_model, n_heads, n_kv_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        rope: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("pass either a mask or a cache, not both: the cache implies a causal mask")
        q = split_heads(self.w_q(x), self.n_heads)  # (B, H, T, Dh)
        k = split_heads(self.w_k(x), self.n_kv_heads)  # (B, Hkv, T, Dh)
        v = split_heads(self.w_v(x), self.n_kv_heads)
        if rope is not None:
            start = 0 if cache is None else len(cache)
            positions = torch.arange(start, start + x.size(1), device=x.device)
            q, k = apply_rope(q, *rope, positions), apply_rope(k, *rope, positions)
        if cache is not None:
            k, v = cache.update(k, v)  # (B, Hkv, T_cached + T, Dh)
            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)
        n_rep = self.n_heads // self.n_kv_heads
        keys, values = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        # Meta's llama/model.py Attention.forward: scores, softmax in float32, cast back to the queries' dtype
        scores = torch.matmul(q, keys.transpose(2, 3)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        scores = F.softmax(scores.float(), dim=-1).type_as(q)
        out = torch.matmul(scores, values)  # (B, H, T, Dh)
        return self.out_proj(merge_heads(out))
