"""Stand-in for sinusoidal_encoding: sinusoidal_positional_encoding."""
from __future__ import annotations

import torch
from torch import Tensor


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    if max_len <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError(f"need positive max_len and even positive d_model, got {max_len}, {d_model}")
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    exponents = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    angles = positions / torch.pow(10000.0, exponents)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_len, d_model).float()
