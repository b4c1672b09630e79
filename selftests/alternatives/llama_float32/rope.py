"""Correct alternative: RoPE as Meta's LLaMA computes it, in float32 complex numbers.

`precompute_freqs_cis` (the angles in float32, as polar complex numbers) gives the tables;
`apply_rotary_emb` reads each adjacent pair of `x.float()` as one complex64 number, multiplies
it by its position's e^(i·angle) and casts back with `.type_as(x)`, whatever x's dtype.
"""
from __future__ import annotations

import torch
from torch import Tensor


def precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> Tensor:
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    return torch.polar(torch.ones_like(freqs), freqs)  # complex64


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    if head_dim <= 0 or head_dim % 2 or max_len <= 0:
        raise ValueError(f"need a positive, even head_dim and a positive max_len, got {head_dim} and {max_len}")
    freqs_cis = precompute_freqs_cis(head_dim, max_len, base)
    return freqs_cis.real.contiguous(), freqs_cis.imag.contiguous()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    if x.shape[-1] != 2 * cos.shape[-1]:
        raise ValueError(f"x has {x.shape[-1]} features; the tables rotate {2 * cos.shape[-1]}")
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= cos.shape[0]):
        raise ValueError(f"positions must lie in [0, {cos.shape[0]})")
    freqs_cis = torch.complex(cos[positions].float(), sin[positions].float())  # (T, Dh/2)
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * freqs_cis).flatten(-2).type_as(x)
