"""The Pre-LN Transformer block (reference solution)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn as nn
from torch import Tensor

from .attention import MultiHeadAttention

if TYPE_CHECKING:
    from .kv_cache import KVCache


class TransformerBlock(nn.Module):
    """Pre-LN block: x + attn(norm1(x)), then x + ff(norm2(x)); (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> Tensor:
        x = x + self.dropout(self.attention(self.norm1(x), mask, cache))
        return x + self.dropout(self.ff(self.norm2(x)))
