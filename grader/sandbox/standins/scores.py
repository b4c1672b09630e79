"""Stand-in for scaling: attention_scores."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    return torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
