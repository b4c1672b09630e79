"""Stand-in for swin_windows: window_partition, window_reverse, shifted_window_mask, by index arithmetic."""
from __future__ import annotations

import torch
from torch import Tensor


def _check(H: int, W: int, ws: int) -> None:
    if H % ws or W % ws:
        raise ValueError(f"H={H} and W={W} are not multiples of window_size={ws}")


def _order(H: int, W: int, ws: int, device=None) -> Tensor:
    """For each (window, token) of the partition, the flat index r * W + c of its position in the map."""
    r = torch.arange(H, device=device)[:, None].expand(H, W)
    c = torch.arange(W, device=device)[None, :].expand(H, W)
    window = (r // ws) * (W // ws) + c // ws
    token = (r % ws) * ws + c % ws
    order = torch.empty(H * W, dtype=torch.long, device=device)
    order[(window * ws * ws + token).reshape(-1)] = torch.arange(H * W, device=device)
    return order


def window_partition(x: Tensor, window_size: int) -> Tensor:
    B, H, W, C = x.shape
    _check(H, W, window_size)
    flat = x.reshape(B, H * W, C)[:, _order(H, W, window_size, x.device)]
    return flat.reshape(B * (H * W) // (window_size * window_size), window_size * window_size, C)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    C = windows.shape[-1]
    flat = windows.reshape(-1, H * W, C)
    out = torch.empty_like(flat)
    out[:, _order(H, W, window_size, windows.device)] = flat
    return out.reshape(-1, H, W, C)


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    ws, s = window_size, shift_size
    if not 0 <= s < ws:
        raise ValueError(f"shift_size={s} must lie in 0 .. {ws - 1}")
    _check(H, W, ws)

    def region(n: int) -> Tensor:
        i = torch.arange(n, device=device)
        return (i >= n - ws).long() + (i >= n - s).long() if s else torch.zeros(n, dtype=torch.long, device=device)

    labels = (region(H)[:, None] * 3 + region(W)[None, :]).reshape(1, H, W, 1)
    windows = window_partition(labels, ws)[..., 0]
    return windows[:, :, None] == windows[:, None, :]
