"""Correct alternative: SwiGLU through F.linear on the layers' weights, and silu as z / (1 + exp(-z))."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate = F.linear(x, self.w_gate.weight)
        silu = gate / (1 + torch.exp(-gate))
        return F.linear(silu * F.linear(x, self.w_up.weight), self.w_down.weight)
