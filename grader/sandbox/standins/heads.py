"""Stand-in for head_splitting: split_heads, merge_heads."""
from __future__ import annotations

from torch import Tensor


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)
