"""Alternative: grouped-query attention by a grouped einsum, keys and values never repeated.

The queries are viewed as (B, Hkv, n_rep, T, Dh) and meet their group's key/value head in one
einsum; the mask fills with the dtype's lowest value; repeat_kv by index_select; heads split by
view + transpose; the cache branch's mask by an arange comparison.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    if n_rep < 1:
        raise ValueError(f"n_rep must be at least 1, got {n_rep}")
    index = torch.arange(x.shape[1] * n_rep, device=x.device) // n_rep
    return x.index_select(1, index)


class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        if not (n_kv_heads >= 1 and d_model % n_heads == 0 and n_heads % n_kv_heads == 0):
            raise ValueError(f"bad sizes: d_model={d_model}, n_heads={n_heads}, n_kv_heads={n_kv_heads}")
        self.d_model, self.n_heads, self.n_kv_heads, self.d_k = d_model, n_heads, n_kv_heads, d_model // n_heads
        kv_width = n_kv_heads * self.d_k
        self.w_q, self.w_k = nn.Linear(d_model, d_model, bias=bias), nn.Linear(d_model, kv_width, bias=bias)
        self.w_v, self.out_proj = nn.Linear(d_model, kv_width, bias=bias), nn.Linear(d_model, d_model, bias=bias)

    def _heads(self, t: Tensor, n: int) -> Tensor:
        batch, length, _ = t.shape
        return t.view(batch, length, n, self.d_k).transpose(1, 2)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("give a mask or a cache, not both")
        batch, length, _ = x.shape
        n_rep = self.n_heads // self.n_kv_heads
        q, k, v = self._heads(self.w_q(x), self.n_heads), self._heads(self.w_k(x), self.n_kv_heads), \
            self._heads(self.w_v(x), self.n_kv_heads)
        past = 0 if cache is None else len(cache)
        if rope is not None:
            positions = torch.arange(past, past + length, device=x.device)
            q, k = apply_rope(q, *rope, positions=positions), apply_rope(k, *rope, positions=positions)
        if cache is not None:
            k, v = cache.update(k, v)
            total = k.shape[-2]
            mask = torch.arange(total, device=x.device) <= torch.arange(past, past + length, device=x.device)[:, None]
        grouped = q.reshape(batch, self.n_kv_heads, n_rep, length, self.d_k)
        scores = torch.einsum("bgrtd,bgsd->bgrts", grouped, k) / math.sqrt(self.d_k)
        if mask is not None:
            allowed = mask.expand(batch, self.n_heads, length, k.shape[-2]).reshape(scores.shape)
            scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
        weights = torch.softmax(scores, dim=-1)
        out = torch.einsum("bgrts,bgsd->bgrtd", weights, v).reshape(batch, self.n_heads, length, self.d_k)
        return self.out_proj(out.transpose(1, 2).reshape(batch, length, self.d_model))
