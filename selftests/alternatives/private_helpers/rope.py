"""Correct alternative: RoPE through private helpers, the rotated pairs written by index into a new tensor."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise ValueError(message)


def _rows(table: Tensor, positions: Tensor, like: Tensor) -> Tensor:
    """The table's rows at `positions`, in `like`'s dtype and on its device."""
    return table.index_select(0, positions.to(table.device)).to(device=like.device, dtype=like.dtype)


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    _check(max_len > 0 and head_dim > 0, f"sizes must be positive, got max_len={max_len}, head_dim={head_dim}")
    _check(head_dim % 2 == 0, f"head_dim must be even, got {head_dim}")
    inv_freq = torch.exp(torch.arange(0, head_dim, 2, dtype=torch.float32) * (-math.log(base) / head_dim))
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * inv_freq[None, :]
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    _check(x.shape[-1] == 2 * cos.shape[-1], f"x's last dimension {x.shape[-1]} is not 2 * {cos.shape[-1]}")
    if positions is None:
        positions = torch.arange(x.shape[-2])
    _check(bool(torch.all((positions >= 0) & (positions < cos.shape[0]))), "a position is outside the tables")
    c, s = _rows(cos, positions, x), _rows(sin, positions, x)
    even, odd = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = even * c - odd * s
    out[..., 1::2] = even * s + odd * c
    return out
