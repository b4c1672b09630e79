"""Correct alternative: silu written by hand in a private helper."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def _silu(z: Tensor) -> Tensor:
    return z * torch.sigmoid(z)


class SwiGLU(nn.Module):
    def __init__(self, d_model: int, d_ff: int) -> None:
        super().__init__()
        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        hidden = _silu(self.w_gate(x))
        hidden = hidden * self.w_up(x)
        return self.w_down(hidden)
