"""Correct alternative: statistics with torch.var_mean, computed in float64 and cast back.

(Not LLaMA's `x.float()`: that would round a float64 input down to float32.)
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
        wide = x.double()
        var, mean = torch.var_mean(wide, dim=-1, keepdim=True, correction=0)
        normed = ((wide - mean) / (var + self.eps).sqrt()).to(x.dtype)
        return normed * self.weight + self.bias


class RMSNorm(nn.Module):
    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        wide = x.double()
        rms = torch.linalg.vector_norm(wide, dim=-1, keepdim=True) / wide.size(-1) ** 0.5
        return (wide / torch.sqrt(rms * rms + self.eps)).to(x.dtype) * self.weight
