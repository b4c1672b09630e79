"""Stand-in for masking: causal_mask, apply_mask."""
from __future__ import annotations

import torch
from torch import Tensor


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    k_len = q_len if k_len is None else k_len
    if k_len < q_len:
        raise ValueError(f"k_len={k_len} must be at least q_len={q_len}")
    rows = torch.arange(q_len, device=device).unsqueeze(1)
    cols = torch.arange(k_len, device=device).unsqueeze(0)
    return cols <= rows + (k_len - q_len)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return scores
    return torch.where(mask, scores, torch.finfo(scores.dtype).min)
