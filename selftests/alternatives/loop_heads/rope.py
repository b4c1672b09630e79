"""Alternative: RoPE with explicit Python loops, one frequency and one feature pair at a time."""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    if max_len < 1 or head_dim < 1 or head_dim % 2 == 1:
        raise ValueError("max_len must be positive and head_dim positive and even")
    positions = torch.arange(max_len, dtype=torch.float64)
    cos_columns, sin_columns = [], []
    for i in range(head_dim // 2):
        angle = positions * (1.0 / base ** (2 * i / head_dim))  # a Python float frequency, in float64
        cos_columns.append(torch.cos(angle))
        sin_columns.append(torch.sin(angle))
    return torch.stack(cos_columns, dim=1).float(), torch.stack(sin_columns, dim=1).float()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    n_pairs = cos.shape[1]
    if x.shape[-1] != 2 * n_pairs:
        raise ValueError(f"Dh = {x.shape[-1]}, but the tables have {n_pairs} pairs")
    rows = list(range(x.shape[-2])) if positions is None else positions.tolist()
    for p in rows:
        if p < 0 or p >= cos.shape[0]:
            raise ValueError(f"position {p} is outside the tables (0 .. {cos.shape[0] - 1})")
    rows = torch.tensor(rows, dtype=torch.int64, device=x.device)
    columns = []
    for i in range(n_pairs):
        c, s = cos[rows, i].to(x.dtype), sin[rows, i].to(x.dtype)  # (T,)
        first, second = x[..., 2 * i], x[..., 2 * i + 1]  # (..., T)
        columns.append(first * c - second * s)
        columns.append(first * s + second * c)
    return torch.stack(columns, dim=-1)
