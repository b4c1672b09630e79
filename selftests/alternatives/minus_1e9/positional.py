"""Alternative: torch.pow frequencies, sin/cos interleaved with stack + flatten."""
from __future__ import annotations

import torch
from torch import Tensor


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    if max_len < 1:
        raise ValueError(f"max_len must be positive, got {max_len}")
    if d_model < 1 or d_model % 2 == 1:
        raise ValueError(f"d_model must be a positive even number, got {d_model}")
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    div = torch.pow(torch.tensor(10000.0, dtype=torch.float32), two_i / d_model)
    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    angles = pos / div  # (max_len, d_model / 2)
    return torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(1)
