"""Grouped-query attention (component ``grouped_query_attention``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``(B, Hkv, T, Dh)`` -> ``(B, Hkv * n_rep, T, Dh)``."""
    raise NotImplementedError("grouped_query_attention: write repeat_kv")


class GroupedQueryAttention(nn.Module):
    """Attention whose query heads share fewer key/value heads; ``(B, T, D)`` -> ``(B, T, D)``."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        super().__init__()
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.forward")
