"""Decoding: temperature, top-k, top-p and generation (component ``sampling``)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """``(..., V)`` -> ``(..., V)``."""
    raise NotImplementedError("sampling: write filter_logits")


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    """``(B, V)`` -> int64 ``(B,)``."""
    raise NotImplementedError("sampling: write sample_next_token")


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    """``(B, T)`` -> ``(B, T + max_new_tokens)``."""
    raise NotImplementedError("sampling: write generate")
