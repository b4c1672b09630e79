"""Swin windows with Tensor.unfold (any dtype), window_reverse by concatenation in loops, and the regions
numbered by torch.bucketize."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from .attention import merge_heads, split_heads


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C)."""
    B, H, W, C = x.shape
    ws = window_size
    if H % ws or W % ws:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={ws}")
    tiles = x.unfold(1, ws, ws).unfold(2, ws, ws)  # (B, gh, gw, C, ws, ws)
    return tiles.permute(0, 1, 2, 4, 5, 3).reshape(-1, ws * ws, C)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """(B * nW, ws * ws, C) -> (B, H, W, C): each row of windows side by side, the rows one below the other."""
    ws, C = window_size, windows.shape[-1]
    gh, gw = H // ws, W // ws
    grid = windows.reshape(-1, gh, gw, ws, ws, C)
    rows = [torch.cat([grid[:, i, j] for j in range(gw)], dim=2) for i in range(gh)]  # each (B, ws, W, C)
    return torch.cat(rows, dim=1)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool (nW, N, N): the three slices' numbers from bucketize, the windows from unfold."""
    ws, s = window_size, shift_size
    if not 0 <= s < ws or H % ws or W % ws:
        raise ValueError(f"need 0 <= shift_size < window_size dividing H and W; got {H}, {W}, {ws}, {s}")

    def regions(n: int) -> Tensor:
        cuts = torch.tensor([n - ws, n - s], device=device)
        return torch.bucketize(torch.arange(n, device=device), cuts, right=True)

    labels = regions(H)[:, None] * 3 + regions(W)[None, :]
    windows = labels.unfold(0, ws, ws).unfold(1, ws, ws).reshape(-1, ws * ws)
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
