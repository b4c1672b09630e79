"""Stand-in for qkv_projection: MultiHeadAttention.__init__ and project_qkv."""
from __future__ import annotations

import torch.nn as nn
from torch import Tensor


def __init__(self: nn.Module, d_model: int, n_heads: int, bias: bool = True) -> None:
    nn.Module.__init__(self)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    self.last_attention = None
    _ensure_layers(self, d_model, n_heads, bias)


def _ensure_layers(self: nn.Module, d_model: int, n_heads: int, bias: bool) -> None:
    self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
    seen: list[nn.Module] = []
    for name in ("w_q", "w_k", "w_v", "out_proj"):
        layer = getattr(self, name, None)
        fits = (
            isinstance(layer, nn.Linear)
            and layer.weight.shape == (d_model, d_model)
            and (layer.bias is not None) == bias
            and not any(layer is other for other in seen)
        )
        seen.append(layer)
        if not fits:
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))


def wrap_init(student_init):
    """A student's `MultiHeadAttention.__init__`, made sure to leave the contract's layers in place."""

    def init(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        try:
            student_init(self, d_model, n_heads, bias)
        except Exception:  # noqa: BLE001 - another component's bug must not cost this one
            __init__(self, d_model, n_heads, bias)
        _ensure_layers(self, d_model, n_heads, bias)
        if not hasattr(self, "last_attention"):
            self.last_attention = None

    return init


def project_qkv(self: nn.Module, x: Tensor):
    return self.w_q(x), self.w_k(x), self.w_v(x)
