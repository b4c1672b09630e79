"""Two alternatives in one file.

Windows with Tensor.unfold (any dtype), window_reverse by concatenation in loops, and the regions numbered by
torch.bucketize.
Window attention: the official Swin code's way (microsoft/Swin-Transformer): the index from stacked meshgrid
coordinates, q scaled before q @ k^T, and the bool mask turned into a float mask of 0 and -100 that is added to
the scores.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


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
    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        super().__init__()
        self.dim, self.window_size, self.n_heads = dim, window_size, n_heads
        head_dim = dim // n_heads
        self.scale = head_dim ** -0.5
        ws = window_size
        self.relative_position_bias_table = nn.Parameter(torch.zeros((2 * ws - 1) * (2 * ws - 1), n_heads))
        coords = torch.stack(torch.meshgrid([torch.arange(ws), torch.arange(ws)], indexing="ij"))  # 2, ws, ws
        coords_flatten = torch.flatten(coords, 1)  # 2, N
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]  # 2, N, N
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()  # N, N, 2
        relative_coords[:, :, 0] += ws - 1
        relative_coords[:, :, 1] += ws - 1
        relative_coords[:, :, 0] *= 2 * ws - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)
        nn.init.trunc_normal_(self.relative_position_bias_table, std=0.02)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.n_heads, C // self.n_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[self.relative_position_index.view(-1)].view(
            N, N, -1)
        attn = attn + relative_position_bias.permute(2, 0, 1).contiguous().unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn_mask = torch.zeros(mask.shape, dtype=attn.dtype, device=attn.device).masked_fill(~mask, -100.0)
            attn = attn.view(B_ // nW, nW, self.n_heads, N, N) + attn_mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.n_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class Mlp(nn.Sequential):
    def __init__(self, in_features: int, hidden_features: int) -> None:
        super().__init__(nn.Linear(in_features, hidden_features), nn.GELU(), nn.Linear(hidden_features, in_features))


class SwinBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.dim, self.window_size, self.shift_size = dim, window_size, shift_size
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, window_size, n_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        B, H, W, C = x.shape
        if H % self.window_size or W % self.window_size:
            raise ValueError("input resolution must be a multiple of the window size")
        shortcut = x
        x = self.norm1(x)
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
            attn_mask = shifted_window_mask(H, W, self.window_size, self.shift_size, device=x.device)
        else:
            shifted_x = x
            attn_mask = None
        x_windows = window_partition(shifted_x, self.window_size)  # nW*B, N, C
        attn_windows = self.attn(x_windows, mask=attn_mask)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = shortcut + x
        x = x + self.mlp(self.norm2(x))
        return x
