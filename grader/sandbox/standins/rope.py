"""Stand-in for rope: rope_angles, apply_rope, as complex multiplication (the adjacent-pair layout)."""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    if head_dim % 2 or head_dim <= 0 or max_len <= 0:
        raise ValueError(f"rope_angles needs a positive, even head_dim and a positive max_len, got {head_dim}, {max_len}")
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * freqs
    return torch.cos(angles), torch.sin(angles)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    if x.shape[-1] != 2 * cos.shape[-1]:
        raise ValueError(f"x has {x.shape[-1]} features, the tables are for {2 * cos.shape[-1]}")
    if positions is None:
        positions = torch.arange(x.shape[-2], device=x.device)
    if positions.numel() and (int(positions.min()) < 0 or int(positions.max()) >= cos.shape[0]):
        raise ValueError(f"positions must lie in 0 .. {cos.shape[0] - 1}")
    wide = torch.float64 if x.dtype == torch.float64 else torch.float32
    pairs = torch.view_as_complex(x.to(wide).reshape(*x.shape[:-1], -1, 2).contiguous())
    turn = torch.complex(cos[positions].to(wide), sin[positions].to(wide))
    return torch.view_as_real(pairs * turn).reshape(x.shape).to(x.dtype)
