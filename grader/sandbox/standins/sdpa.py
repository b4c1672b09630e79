"""Stand-in for multi_head_attention's function: scaled_dot_product_attention, on PyTorch's own.

Built from the call that course.yml forbids multi_head_attention (`F.scaled_dot_product_attention`): code run in
another component's worker that carries it out and hands it in as its own breaks the from-scratch rule there.
The weights are the same call with the identity for values: softmax(q k^T / sqrt(d) masked) @ I.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(*q.shape[:-2], k.shape[-2], k.shape[-2])
    weights = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights
