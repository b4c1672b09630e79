"""Correct alternative: the checks of the arguments through attention.py's private `_require`."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .attention import _require


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    """float32 (max_len, d_model): PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(...)."""
    _require(max_len > 0 and d_model > 0, f"max_len and d_model must be positive, got {max_len} and {d_model}")
    _require(d_model % 2 == 0, f"d_model must be even, got {d_model}")
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float32)
    pe[:, 0::2] = torch.sin(position * inv_freq)
    pe[:, 1::2] = torch.cos(position * inv_freq)
    return pe
