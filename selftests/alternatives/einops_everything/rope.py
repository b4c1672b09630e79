"""Correct alternative: RoPE with einops and einsum, each pair turned by an explicit 2x2 rotation matrix."""
from __future__ import annotations

import math

import torch
from einops import rearrange
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    if head_dim % 2 or min(max_len, head_dim) <= 0:
        raise ValueError(f"rope_angles needs positive sizes and an even head_dim, got ({max_len}, {head_dim})")
    pair = torch.arange(head_dim // 2, dtype=torch.float32)
    freqs = torch.exp(pair * (-2.0 * math.log(base) / head_dim))
    angles = torch.einsum("p,f->pf", torch.arange(max_len, dtype=torch.float32), freqs)
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    if x.shape[-1] != cos.shape[-1] * 2:
        raise ValueError(f"apply_rope: head size {x.shape[-1]} does not fit tables of {cos.shape[-1]} pairs")
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    if positions.numel() and not (0 <= int(positions.min()) and int(positions.max()) < cos.shape[0]):
        raise ValueError(f"apply_rope: positions outside 0..{cos.shape[0] - 1}")
    c, s = cos[positions].to(x.dtype), sin[positions].to(x.dtype)
    rotation = rearrange(torch.stack((c, -s, s, c), dim=-1), "t f (i j) -> t f i j", i=2)  # (T, Dh/2, 2, 2)
    pairs = rearrange(x, "... t (f two) -> ... t f two", two=2)
    turned = torch.einsum("tfij,...tfj->...tfi", rotation, pairs)
    return rearrange(turned, "... t f two -> ... t (f two)")
