"""Correct alternative: RoPE as complex multiplication, in float64 throughout and cast back.

The angles are float64 (then float32 tables, as the contract says); apply_rope reads each
adjacent pair as one complex128 number and multiplies it by cos + 1j * sin of its position.
"""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """float32 (max_len, head_dim // 2) tables of cos and sin of p * base**(-2i / head_dim)."""
    if head_dim <= 0 or max_len <= 0:
        raise ValueError(f"head_dim and max_len must be positive, got {head_dim} and {max_len}")
    if head_dim % 2 != 0:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    exponent = torch.arange(head_dim // 2, dtype=torch.float64) * 2 / head_dim
    angle = torch.arange(max_len, dtype=torch.float64)[:, None] / torch.pow(base, exponent)
    return torch.cos(angle).to(torch.float32), torch.sin(angle).to(torch.float32)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    """x (..., T, Dh): each pair (2i, 2i+1) as x[2i] + 1j x[2i+1], times cos + 1j sin of its position."""
    if x.size(-1) != 2 * cos.size(-1):
        raise ValueError(f"x has {x.size(-1)} features per head; these tables rotate {2 * cos.size(-1)}")
    if positions is None:
        positions = torch.arange(x.size(-2), device=x.device)
    if bool(((positions < 0) | (positions >= cos.size(0))).any()):
        raise ValueError(f"every position must be in [0, {cos.size(0)}), got {positions.tolist()}")
    pairs = torch.view_as_complex(x.to(torch.float64).unflatten(-1, (-1, 2)).contiguous())
    turn = torch.complex(cos[positions].to(torch.float64), sin[positions].to(torch.float64))
    return torch.view_as_real(pairs * turn).flatten(-2).to(x.dtype)
