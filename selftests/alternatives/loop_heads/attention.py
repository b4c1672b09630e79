"""Alternative: multi-head attention with an explicit Python loop over heads.

Masks filled with torch.finfo(dtype).min; split/merge via view + transpose /
permute + reshape; causal_mask via an arange comparison; scores via einsum.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:
    from .kv_cache import KVCache


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model {d_model} must be divisible by n_heads {n_heads}")
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    batch, n_heads, length, d_head = x.shape
    return x.permute(0, 2, 1, 3).reshape(batch, length, n_heads * d_head)


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    d = q.shape[-1]
    return torch.einsum("...id,...jd->...ij", q, k) / math.sqrt(d)


def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    if k_len is None:
        k_len = q_len
    if k_len < q_len:
        raise ValueError(f"causal_mask: k_len ({k_len}) is smaller than q_len ({q_len})")
    rows = torch.arange(q_len, device=device).unsqueeze(-1)
    cols = torch.arange(k_len, device=device).unsqueeze(0)
    return cols <= rows + (k_len - q_len)


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    if mask is None:
        return scores
    lowest = torch.finfo(scores.dtype).min
    return scores.masked_fill(mask.logical_not(), lowest)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    scores = apply_mask(attention_scores(q, k), mask)
    weights = torch.softmax(scores, dim=-1)
    out = torch.matmul(weights, v)
    return out, weights


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError("d_model must be divisible by n_heads")
        self.d_model = d_model
        self.n_heads = n_heads
        self.d_k = d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=bias)
        self.w_k = nn.Linear(d_model, d_model, bias=bias)
        self.w_v = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.last_attention = None

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q = self.w_q(x)
        k = self.w_k(x)
        v = self.w_v(x)
        return q, k, v

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        if cache is not None and mask is not None:
            raise ValueError("a mask cannot be combined with a KV cache")
        q_all, k_all, v_all = self.project_qkv(x)
        dh = self.d_k
        if cache is not None:
            k_heads = split_heads(k_all, self.n_heads)
            v_heads = split_heads(v_all, self.n_heads)
            k_heads, v_heads = cache.update(k_heads, v_heads)
            mask = causal_mask(x.shape[1], k_heads.shape[-2], device=x.device)
        outs, weights = [], []
        for h in range(self.n_heads):
            q_h = q_all[:, :, h * dh:(h + 1) * dh]  # (B, T, Dh)
            if cache is not None:
                k_h, v_h = k_heads[:, h], v_heads[:, h]
            else:
                k_h = k_all[:, :, h * dh:(h + 1) * dh]
                v_h = v_all[:, :, h * dh:(h + 1) * dh]
            m_h = None
            if mask is not None:
                # mask broadcastable to (B, H, Tq, Tk): pick this head's slice.
                m = mask
                while m.dim() < 4:
                    m = m.unsqueeze(0)
                m_h = m[:, h] if m.shape[1] != 1 else m[:, 0]
            o, w = scaled_dot_product_attention(q_h, k_h, v_h, m_h)
            outs.append(o)
            weights.append(w)
        self.last_attention = torch.stack(weights, dim=1).detach()
        return self.out_proj(torch.cat(outs, dim=-1))
