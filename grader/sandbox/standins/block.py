"""Stand-in for pre_ln_block: TransformerBlock, on the implementation's MultiHeadAttention."""
from __future__ import annotations

import torch.nn as nn
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = impl.attention.MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        h = x + self.dropout(self.attention(self.norm1(x), mask, cache))
        return h + self.dropout(self.ff(self.norm2(h)))
