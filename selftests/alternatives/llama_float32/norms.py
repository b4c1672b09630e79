"""Correct alternative: the norms as Meta's and Hugging Face's LLaMA code writes them.

The statistics are computed in float32 whatever the input's dtype (`x.float()`), and the result is cast
back with `.type_as(x)` (Meta's llama/model.py RMSNorm) or `.to(input_dtype)` (HF's LlamaRMSNorm). The
contract allows a float64 result computed partly in float32.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        input_dtype = x.dtype
        hidden = x.to(torch.float32)
        mean = hidden.mean(-1, keepdim=True)
        variance = (hidden - mean).pow(2).mean(-1, keepdim=True)
        hidden = (hidden - mean) * torch.rsqrt(variance + self.eps)
        return self.weight * hidden.to(input_dtype) + self.bias


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x: Tensor) -> Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x: Tensor) -> Tensor:
        output = self._norm(x.float()).type_as(x)
        return output * self.weight
