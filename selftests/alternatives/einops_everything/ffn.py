"""Correct alternative: SwiGLU as einsums over the layers' weights."""
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
        gate = torch.einsum("...d,fd->...f", x, self.w_gate.weight)
        up = torch.einsum("...d,fd->...f", x, self.w_up.weight)
        return torch.einsum("...f,df->...d", F.silu(gate) * up, self.w_down.weight)
