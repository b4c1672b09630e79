"""Alternative (window_attention): explicit loops over windows and heads, the index by loops over
token coordinates, its own softmax, masked pairs at -inf through torch.where, the roll by slicing.

The three window functions are the reference's (solutions/swin.py), copied unchanged.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C): windows row-major over the grid, tokens row-major inside."""
    B, H, W, C = x.shape
    ws = window_size
    if H % ws or W % ws:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={ws}")
    x = x.view(B, H // ws, ws, W // ws, ws, C)  # (B, gh, ws, gw, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """(B * nW, ws * ws, C) -> (B, H, W, C), the inverse of window_partition."""
    ws, C = window_size, windows.size(-1)
    x = windows.view(-1, H // ws, W // ws, ws, ws, C)  # (B, gh, gw, ws, ws, C)
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool (nW, N, N): True where two tokens of a window of the rolled map come from the same region."""
    ws, s = window_size, shift_size
    if not 0 <= s < ws or H % ws or W % ws:
        raise ValueError(f"need 0 <= shift_size < window_size and H, W multiples of it; got {H}, {W}, {ws}, {s}")
    labels = torch.zeros(1, H, W, 1, device=device)
    count = 0
    for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):
        for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):
            labels[:, rows, cols, :] = count
            count += 1
    windows = window_partition(labels, ws).squeeze(-1)  # (nW, N)
    return windows[:, :, None] == windows[:, None, :]


def _roll(x: Tensor, shift: int) -> Tensor:
    """x (B, H, W, C) with pixel (r, c) moved to (r + shift, c + shift) mod (H, W)."""
    H, W = x.shape[1], x.shape[2]
    a, b = (-shift) % H, (-shift) % W
    x = torch.cat([x[:, a:], x[:, :a]], dim=1)
    return torch.cat([x[:, :, b:], x[:, :, :b]], dim=2)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        ws, side = window_size, 2 * window_size - 1
        self.relative_position_bias_table = nn.Parameter(torch.empty(side * side, n_heads).normal_(0.0, 0.02))
        index = torch.zeros(ws * ws, ws * ws, dtype=torch.long)
        for i in range(ws * ws):
            for j in range(ws * ws):
                index[i, j] = (i // ws - j // ws + ws - 1) * side + (i % ws - j % ws + ws - 1)
        self.register_buffer("relative_position_index", index)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        B_, N, C = x.shape
        d = C // self.n_heads
        q, k, v = self.qkv(x).split(C, dim=-1)
        windows = []
        for b in range(B_):
            heads = []
            for h in range(self.n_heads):
                cols = slice(h * d, (h + 1) * d)
                scores = q[b, :, cols] @ k[b, :, cols].T * d ** -0.5
                scores = scores + self.relative_position_bias_table[:, h][self.relative_position_index]
                if mask is not None:
                    scores = torch.where(mask[b % mask.shape[0]], scores, torch.full_like(scores, float("-inf")))
                weights = (scores - scores.max(dim=-1, keepdim=True).values).exp()
                heads.append((weights / weights.sum(dim=-1, keepdim=True)) @ v[b, :, cols])
            windows.append(torch.cat(heads, dim=-1))
        return F.linear(torch.stack(windows), self.proj.weight, self.proj.bias)


class SwinBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        hidden = int(dim * mlp_ratio)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, n_heads)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor) -> Tensor:
        H, W = x.shape[1], x.shape[2]
        ws, s = self.window_size, self.shift_size
        if H % ws != 0 or W % ws != 0:
            raise ValueError(f"H={H}, W={W}: both must be multiples of the window size {ws}")
        y = self.norm1(x)
        if s > 0:
            y = window_reverse(self.attn(window_partition(_roll(y, -s), ws), shifted_window_mask(H, W, ws, s)),
                               ws, H, W)
            y = _roll(y, s)
        else:
            y = window_reverse(self.attn(window_partition(y, ws)), ws, H, W)
        x = x + y
        return x + self.mlp(self.norm2(x))
