"""Two alternatives in one file.

Windows by index arithmetic: a gather of the map's flat positions, its scatter back, and the mask from the
pixels the roll wraps round (two regions per axis, rolled by -shift_size).
Window attention: explicit loops over windows and heads, the index by loops over token coordinates, its own
softmax, masked pairs at -inf through torch.where, the roll by slicing.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _positions(H: int, W: int, ws: int, device=None) -> Tensor:
    """(nW * ws * ws,): the flat index row * W + col of every token of every window, in the windows' order."""
    gw, N = W // ws, ws * ws
    n = torch.arange(H * W // N, device=device)[:, None]  # window
    t = torch.arange(N, device=device)[None, :]  # token in the window
    rows = (n // gw) * ws + t // ws
    cols = (n % gw) * ws + t % ws
    return (rows * W + cols).reshape(-1)


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C)."""
    B, H, W, C = x.shape
    if H % window_size or W % window_size:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={window_size}")
    flat = x.reshape(B, H * W, C)
    picked = flat[:, _positions(H, W, window_size, x.device)]  # (B, nW * N, C)
    return picked.reshape(-1, window_size * window_size, C)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """(B * nW, ws * ws, C) -> (B, H, W, C)."""
    C = windows.shape[-1]
    flat = windows.reshape(-1, H * W, C)
    out = torch.empty_like(flat)
    out[:, _positions(H, W, window_size, windows.device)] = flat
    return out.reshape(-1, H, W, C)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """The first s rows and columns of the image are those the roll wraps round: label them before the roll,
    roll the labels with the map, and compare the labels inside each window."""
    ws, s = window_size, shift_size
    if not 0 <= s < ws:
        raise ValueError(f"shift_size={s} must lie in 0 .. {ws - 1}")
    if H % ws or W % ws:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={ws}")
    wrapped_rows = (torch.arange(H, device=device) < s).long()
    wrapped_cols = (torch.arange(W, device=device) < s).long()
    labels = torch.roll(wrapped_rows[:, None] * 2 + wrapped_cols[None, :], (-s, -s), dims=(0, 1))
    windows = labels.reshape(-1)[_positions(H, W, ws, device)].reshape(-1, ws * ws)
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
