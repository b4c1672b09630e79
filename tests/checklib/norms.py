"""What the checks of layer_norm and rms_norm share: building the student's norm and PyTorch's with one state."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn as nn


@dataclass(frozen=True)
class Norm:
    """One of the norms: its contract name, its adapter, PyTorch's own module and its parameters."""

    name: str  # "LayerNorm"
    new_student: Callable  # checklib.adapters.LayerNorm
    reference: type[nn.Module]  # nn.LayerNorm
    params: tuple[str, ...]  # ("weight", "bias")

    def new(self, impl, d: int, state: dict, eps: float | None):
        """The student's norm over `d` features (default eps when None), carrying `state`, in its dtype."""
        m = self.new_student(impl, d) if eps is None else self.new_student(impl, d, eps=eps)
        if state["weight"].dtype == torch.float64:
            m.to(torch.float64)
        m.load_weights(state)
        return m

    def torch(self, state: dict, d: int, eps: float) -> nn.Module:
        """PyTorch's own norm in float64 with the same parameters."""
        layer = self.reference(d, eps=eps, dtype=torch.float64)
        with torch.no_grad():
            for name in self.params:
                getattr(layer, name).copy_(state[name])
        return layer

    def expected(self, state: dict, x: torch.Tensor, eps: float) -> torch.Tensor:
        return self.torch(state, x.shape[-1], eps)(x.double()).detach().to(x.dtype)

    def call(self, d: int, eps: float | None, x: torch.Tensor) -> str:
        """How a message names the call: `LayerNorm(8, eps=1e-06)(x (2, 8), float32)`."""
        return f"{self.name}({d}{'' if eps is None else f', eps={eps:g}'})(x {tuple(x.shape)}, {str(x.dtype)[6:]})"
