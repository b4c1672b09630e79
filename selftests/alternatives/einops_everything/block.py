"""Alternative: the Pre-LN block written out step by step."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch.nn as nn
from torch import Tensor

from .attention import MultiHeadAttention

if TYPE_CHECKING:
    from .kv_cache import KVCache


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attention = MultiHeadAttention(d_model, n_heads, bias=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(
            nn.Linear(d_model, d_ff),
            nn.ReLU(),
            nn.Linear(d_ff, d_model),
        )
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> Tensor:
        h = self.norm1(x)
        a = self.attention(h, mask=mask, cache=cache)
        x = x + self.dropout(a)
        h = self.norm2(x)
        f = self.ff(h)
        out = x + self.dropout(f)
        return out
