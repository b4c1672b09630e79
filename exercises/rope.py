"""Rotary position embeddings, RoPE (component ``rope``)."""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """``cos, sin``, each float32 ``(max_len, head_dim // 2)``."""
    raise NotImplementedError("rope: write rope_angles")


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    """``x (..., T, Dh)`` rotated pair by pair; same shape and dtype."""
    raise NotImplementedError("rope: write apply_rope")
