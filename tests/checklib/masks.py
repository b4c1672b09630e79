"""Masks for the checks: random ones that never leave a row empty, and PyTorch's opposite convention."""
from __future__ import annotations

import torch
from torch import Tensor

from .causal import causal_bool_mask


def random_mask(*shape: int, gen: torch.Generator, p: float = 0.6) -> Tensor:
    """A bool mask (True = may attend) with at least one True in every row (all-False rows are never graded)."""
    mask = torch.rand(*shape, generator=gen) < p
    keep = torch.randint(0, shape[-1], shape[:-1], generator=gen)
    return mask.scatter(-1, keep.unsqueeze(-1), True)


def self_attention_mask(kind: str, batch: int, n_heads: int, length: int, gen: torch.Generator) -> Tensor | None:
    """A mask of one of the shapes the contract allows: none, causal or 2d (T, T), batch (B, 1, T, T), heads (B, H, T, T)."""
    if kind == "none":
        return None
    if kind == "causal":
        return causal_bool_mask(length)
    if kind == "2d":
        return random_mask(length, length, gen=gen)
    if kind == "batch":
        return random_mask(batch, 1, length, length, gen=gen)
    return random_mask(batch, n_heads, length, length, gen=gen)  # "heads"


def to_torch_attn_mask(mask: Tensor | None, batch: int, n_heads: int, length: int) -> Tensor | None:
    """Our bool mask (True = may attend) in nn.MultiheadAttention's form (True = NOT allowed, (B*H, T, T))."""
    if mask is None:
        return None
    if mask.dim() == 2:
        return ~mask
    return ~mask.expand(batch, n_heads, length, length).reshape(batch * n_heads, length, length)
