"""Swin windows by index arithmetic: a gather of the map's flat positions, its scatter back, and the mask from
the pixels the roll wraps round (two regions per axis, rolled by -shift_size)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from .attention import merge_heads, split_heads


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


class WindowAttention(nn.Module):
    """Multi-head self-attention inside each window, with a learned relative position bias."""

    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        ws = window_size
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, n_heads))
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")).flatten(1)  # (2, N)
        rel = coords[:, :, None] - coords[:, None, :] + ws - 1  # (2, N, N), each in [0, 2ws - 2]
        self.register_buffer("relative_position_index", rel[0] * (2 * ws - 1) + rel[1])  # (N, N)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """x (B_, N, C) -> (B_, N, C); mask bool (nW, N, N), window b uses mask[b % nW]."""
        B_, N, C = x.shape
        q, k, v = (split_heads(t, self.n_heads) for t in self.qkv(x).chunk(3, dim=-1))  # (B_, H, N, Dh)
        scores = q @ k.transpose(-2, -1) / math.sqrt(C / self.n_heads)  # (B_, H, N, N)
        bias = self.relative_position_bias_table[self.relative_position_index]  # (N, N, H)
        scores = scores + bias.permute(2, 0, 1)
        if mask is not None:
            nW = mask.size(0)
            scores = scores.view(B_ // nW, nW, self.n_heads, N, N)
            scores = scores.masked_fill(~mask[None, :, None], float("-inf")).view(B_, self.n_heads, N, N)
        return self.proj(merge_heads(scores.softmax(dim=-1) @ v))


class SwinBlock(nn.Module):
    """(Shifted) window attention and an MLP, each pre-norm with a residual; (B, H, W, C) -> (B, H, W, C)."""

    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, n_heads)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor) -> Tensor:
        B, H, W, C = x.shape
        ws, s = self.window_size, self.shift_size
        if H % ws or W % ws:
            raise ValueError(f"H={H} and W={W} must be multiples of window_size={ws}")
        y = self.norm1(x)
        mask = None
        if s:
            y = torch.roll(y, (-s, -s), dims=(1, 2))
            mask = shifted_window_mask(H, W, ws, s, device=x.device)
        y = window_reverse(self.attn(window_partition(y, ws), mask), ws, H, W)
        if s:
            y = torch.roll(y, (s, s), dims=(1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))
