"""Stand-in for multi_head_attention's function: scaled_dot_product_attention (on the implementation's scores and mask)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
    attention = impl.attention
    weights = F.softmax(attention.apply_mask(attention.attention_scores(q, k), mask), dim=-1)
    return torch.matmul(weights, v), weights
