"""Two alternatives in one file.

Windows: einops' rearrange both ways, and the official code's float mask (0 and -100), then compared.
Window attention: einops for every reshape, the index by meshgrid, masked pairs at -1e9.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from einops import rearrange
from torch import Tensor


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
