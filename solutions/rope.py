"""Rotary position embeddings, RoPE (reference solution)."""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """cos, sin tables (max_len, head_dim // 2) of the angles p * base**(-2i / head_dim), in float32."""
    if head_dim % 2 or head_dim <= 0 or max_len <= 0:
        raise ValueError(f"need a positive, even head_dim and a positive max_len, got {head_dim} and {max_len}")
    inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (Dh/2,)
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)  # (max_len, Dh/2)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    """Rotate each adjacent feature pair (2i, 2i+1) of x (..., T, Dh) by its position's angle."""
    T, Dh = x.shape[-2:]
    if Dh != 2 * cos.size(-1):
        raise ValueError(f"x has {Dh} features, the tables are for {2 * cos.size(-1)}")
    if positions is None:
        positions = torch.arange(T, device=x.device)
    if positions.numel() and (positions.min() < 0 or positions.max() >= cos.size(0)):
        raise ValueError(f"positions must lie in 0 .. {cos.size(0) - 1}")
    c, s = cos[positions].to(x.dtype), sin[positions].to(x.dtype)  # (T, Dh/2)
    x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each
    return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
