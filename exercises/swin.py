"""Swin Transformer's shifted windows (components ``swin_windows`` and ``window_attention``)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """``(B, H, W, C)`` -> ``(B * nW, ws * ws, C)``."""
    raise NotImplementedError("swin_windows: write window_partition")


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """``(B * nW, ws * ws, C)`` -> ``(B, H, W, C)``."""
    raise NotImplementedError("swin_windows: write window_reverse")


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool ``(nW, ws * ws, ws * ws)``."""
    raise NotImplementedError("swin_windows: write shifted_window_mask")


class WindowAttention(nn.Module):
    """Self-attention inside each window, with a relative position bias."""

    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        raise NotImplementedError("window_attention: write WindowAttention.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        raise NotImplementedError("window_attention: write WindowAttention.forward")


class SwinBlock(nn.Module):
    """(Shifted) window attention and an MLP; ``(B, H, W, C)`` -> ``(B, H, W, C)``."""

    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        raise NotImplementedError("window_attention: write SwinBlock.__init__")

    def forward(self, x: Tensor) -> Tensor:
        raise NotImplementedError("window_attention: write SwinBlock.forward")
