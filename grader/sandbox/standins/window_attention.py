"""Stand-in for window_attention: WindowAttention, SwinBlock, on the implementation's windows."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        ws = window_size
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) ** 2, n_heads))
        y, x = torch.arange(ws).repeat_interleave(ws), torch.arange(ws).repeat(ws)
        index = (y[:, None] - y[None, :] + ws - 1) * (2 * ws - 1) + (x[:, None] - x[None, :] + ws - 1)
        self.register_buffer("relative_position_index", index)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        B_, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B_, N, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        bias = self.relative_position_bias_table[self.relative_position_index].permute(2, 0, 1)  # (H, N, N)
        bias = bias.unsqueeze(0).expand(B_, -1, -1, -1)
        if mask is not None:
            nW = mask.shape[0]
            keep = mask.unsqueeze(1).repeat(B_ // nW, 1, 1, 1)  # (B_, 1, N, N): window b uses mask[b % nW]
            bias = bias.masked_fill(~keep, float("-inf"))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype))
        return self.proj(out.transpose(1, 2).reshape(B_, N, C))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.window_size, self.shift_size = window_size, shift_size
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = impl.swin.WindowAttention(dim, window_size, n_heads)
        hidden = int(dim * mlp_ratio)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: Tensor) -> Tensor:
        B, H, W, C = x.shape
        ws, s = self.window_size, self.shift_size
        if H % ws or W % ws:
            raise ValueError(f"H={H} and W={W} are not multiples of window_size={ws}")
        swin = impl.swin
        y = self.norm1(x)
        if s:
            y = torch.roll(y, (-s, -s), dims=(1, 2))
        mask = swin.shifted_window_mask(H, W, ws, s, device=x.device) if s else None
        y = swin.window_reverse(self.attn(swin.window_partition(y, ws), mask), ws, H, W)
        if s:
            y = torch.roll(y, (s, s), dims=(1, 2))
        x = x + y
        return x + self.mlp(self.norm2(x))
