"""A tiny LLaMA-style language model (component ``tiny_lm``)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


class DecoderBlock(nn.Module):
    """Pre-norm decoder block; ``(B, T, D)`` -> ``(B, T, D)``."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        raise NotImplementedError("tiny_lm: write DecoderBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        raise NotImplementedError("tiny_lm: write DecoderBlock.forward")


class TinyLM(nn.Module):
    """Token ids ``(B, T)`` -> logits ``(B, T, vocab_size)``."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        raise NotImplementedError("tiny_lm: write TinyLM.__init__")

    def new_caches(self) -> list[KVCache]:
        raise NotImplementedError("tiny_lm: write TinyLM.new_caches")

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        raise NotImplementedError("tiny_lm: write TinyLM.forward")
