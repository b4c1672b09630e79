"""Alternative (window_attention): einops for every reshape, the index by meshgrid, masked pairs at -1e9.

The three window functions are the reference's (solutions/swin.py), copied unchanged.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from einops import rearrange
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


class WindowAttention(nn.Module):
    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        ws = window_size
        self.relative_position_bias_table = nn.Parameter(torch.randn((2 * ws - 1) ** 2, n_heads) * 0.02)
        ys, xs = torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij")
        ys, xs = rearrange(ys, "a b -> (a b)"), rearrange(xs, "a b -> (a b)")
        dy = rearrange(ys, "i -> i 1") - rearrange(ys, "j -> 1 j")
        dx = rearrange(xs, "i -> i 1") - rearrange(xs, "j -> 1 j")
        self.register_buffer("relative_position_index", (dy + ws - 1) * (2 * ws - 1) + dx + ws - 1, persistent=False)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        q, k, v = rearrange(self.qkv(x), "b n (three h d) -> three b h n d", three=3, h=self.n_heads)
        scores = torch.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
        bias = rearrange(self.relative_position_bias_table[self.relative_position_index], "i j h -> h i j")
        scores = scores + bias
        if mask is not None:
            scores = rearrange(scores, "(b w) h i j -> b w h i j", w=mask.shape[0])
            scores = scores.masked_fill(~rearrange(mask, "w i j -> 1 w 1 i j"), -1e9)
            scores = rearrange(scores, "b w h i j -> (b w) h i j")
        out = torch.einsum("bhij,bhjd->bhid", scores.softmax(dim=-1), v)
        return self.proj(rearrange(out, "b h n d -> b n (h d)"))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, n_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))

    def forward(self, x: Tensor) -> Tensor:
        _, H, W, _ = x.shape
        ws, s = self.window_size, self.shift_size
        if H % ws or W % ws:
            raise ValueError(f"the map {H}x{W} does not split into {ws}x{ws} windows")
        y = torch.roll(self.norm1(x), (-s, -s), dims=(1, 2))  # a roll by 0 changes nothing
        windows = rearrange(y, "b (gh p) (gw q) c -> (b gh gw) (p q) c", p=ws, q=ws)
        out = self.attn(windows, shifted_window_mask(H, W, ws, s, device=x.device) if s else None)
        y = rearrange(out, "(b gh gw) (p q) c -> b (gh p) (gw q) c", gh=H // ws, gw=W // ws, p=ws)
        x = x + torch.roll(y, (s, s), dims=(1, 2))
        return x + self.mlp(self.norm2(x))
