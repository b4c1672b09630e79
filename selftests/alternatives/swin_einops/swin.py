"""Swin windows with einops: rearrange for both ways, and the official code's float mask (0 and -100) compared."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor
from einops import rearrange

from .attention import merge_heads, split_heads


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C)."""
    _, H, W, _ = x.shape
    if H % window_size or W % window_size:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={window_size}")
    return rearrange(x, "b (gh r) (gw c) ch -> (b gh gw) (r c) ch", r=window_size, c=window_size)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """(B * nW, ws * ws, C) -> (B, H, W, C)."""
    return rearrange(windows, "(b gh gw) (r c) ch -> b (gh r) (gw c) ch", gh=H // window_size, gw=W // window_size,
                     r=window_size)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """As Swin's code builds attn_mask (negative slices, a float mask of 0 and -100), then where it is 0."""
    ws, s = window_size, shift_size
    if s < 0 or s >= ws:
        raise ValueError(f"shift_size={s} must lie in 0 .. {ws - 1}")
    if H % ws or W % ws:
        raise ValueError(f"H={H} and W={W} must be multiples of window_size={ws}")
    img_mask = torch.zeros((1, H, W, 1), device=device)
    if s > 0:
        h_slices = (slice(0, -ws), slice(-ws, -s), slice(-s, None))
        w_slices = (slice(0, -ws), slice(-ws, -s), slice(-s, None))
        cnt = 0
        for h in h_slices:
            for w in w_slices:
                img_mask[:, h, w, :] = cnt
                cnt += 1
    mask_windows = window_partition(img_mask, ws).squeeze(-1)  # (nW, N)
    attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
    attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
    return attn_mask == 0


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
