"""Alternative: a Python loop over the dimensions."""
from __future__ import annotations


import torch
from torch import Tensor


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    if not (max_len > 0 and d_model > 0):
        raise ValueError("max_len and d_model must both be positive")
    if d_model % 2:
        raise ValueError("d_model must be even")
    pe = torch.empty(max_len, d_model, dtype=torch.float32)
    positions = torch.arange(max_len, dtype=torch.float32)
    for dim in range(0, d_model, 2):
        freq = 1.0 / (10000.0 ** (dim / d_model))
        angle = positions * freq
        pe[:, dim] = torch.sin(angle)
        pe[:, dim + 1] = torch.cos(angle)
    return pe
