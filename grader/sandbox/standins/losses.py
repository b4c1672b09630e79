"""Stand-in for cross_entropy: softmax, log_softmax, cross_entropy."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return torch.softmax(x, dim=dim)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return torch.log_softmax(x, dim=dim)


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets {tuple(targets.shape)} do not match logits {tuple(logits.shape)}")
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), ignore_index=ignore_index)
