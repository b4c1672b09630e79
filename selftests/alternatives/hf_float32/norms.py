"""Correct alternative: the norms as Hugging Face's LlamaRMSNorm writes them.

The input is taken to float32 (`hidden_states.to(torch.float32)`), normalised there, and cast back
to the input's dtype before the weight (`self.weight * hidden_states.to(input_dtype)`)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    """(x - mean) / sqrt(var + eps) * weight + bias over the last dimension; (..., D) -> (..., D)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))

    def forward(self, x: Tensor) -> Tensor:
        input_dtype = x.dtype
        hidden_states = x.to(torch.float32)
        var, mean = torch.var_mean(hidden_states, dim=-1, keepdim=True, correction=0)
        hidden_states = (hidden_states - mean) * torch.rsqrt(var + self.eps)
        return self.weight * hidden_states.to(input_dtype) + self.bias


class RMSNorm(nn.Module):
    """x / sqrt(mean(x**2) + eps) * weight over the last dimension; (..., D) -> (..., D)."""

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d_model))

    def forward(self, x: Tensor) -> Tensor:
        input_dtype = x.dtype
        hidden_states = x.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.weight * hidden_states.to(input_dtype)
