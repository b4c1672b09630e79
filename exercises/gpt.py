"""A tiny LLaMA-style language model (component ``tiny_lm``)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


class DecoderBlock(nn.Module):
    """Pre-norm decoder block; ``(B, T, D)`` -> ``(B, T, D)``."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        raise NotImplementedError("tiny_lm: write DecoderBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope=None, cache=None) -> Tensor:
        raise NotImplementedError("tiny_lm: write DecoderBlock.forward")


class TinyLM(nn.Module):
    """Token ids ``(B, T)`` -> logits ``(B, T, vocab_size)``."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        raise NotImplementedError("tiny_lm: write TinyLM.__init__")

    def new_caches(self) -> list:
        raise NotImplementedError("tiny_lm: write TinyLM.new_caches")

    def forward(self, idx: Tensor, caches=None) -> Tensor:
        raise NotImplementedError("tiny_lm: write TinyLM.forward")
