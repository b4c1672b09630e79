"""Stand-in for tiny_lm: DecoderBlock, TinyLM, on the implementation's norms, SwiGLU, RoPE and cache.

Its attention is built from `F.scaled_dot_product_attention`, which course.yml forbids tiny_lm (as the
grouped_query_attention stand-in it equals): carried out of a worker and handed in as tiny_lm's code, it breaks
the from-scratch rule (issue 29). Only the checks of components that do not own tiny_lm's names build it
(sampling's), where the implementation's GroupedQueryAttention is grouped_query_attention's stand-in too.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class _Attention(nn.Module):
    """GroupedQueryAttention's layout (w_q, w_k, w_v, out_proj, no bias) on PyTorch's own attention."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.d_k = n_heads, n_kv_heads, d_model // n_heads
        self.w_q = nn.Linear(d_model, d_model, bias=False)
        self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.w_v = nn.Linear(d_model, n_kv_heads * self.d_k, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope=None, cache=None) -> Tensor:
        B, T, D = x.shape
        q = self.w_q(x).view(B, T, self.n_heads, self.d_k).transpose(1, 2)
        k = self.w_k(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)
        v = self.w_v(x).view(B, T, self.n_kv_heads, self.d_k).transpose(1, 2)
        if rope is not None:
            start = 0 if cache is None else len(cache)
            positions = torch.arange(start, start + T, device=x.device)
            q, k = (impl.rope.apply_rope(t, rope[0], rope[1], positions) for t in (q, k))
        if cache is not None:
            k, v = cache.update(k, v)
            mask = torch.ones(T, k.shape[-2], dtype=torch.bool, device=x.device).tril(k.shape[-2] - T)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.n_heads != self.n_kv_heads)
        return self.out_proj(out.transpose(1, 2).reshape(B, T, D))


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = impl.norms.RMSNorm(d_model, eps)
        self.attn = _Attention(d_model, n_heads, n_kv_heads)
        self.ffn_norm = impl.norms.RMSNorm(d_model, eps)
        self.ffn = impl.ffn.SwiGLU(d_model, d_ff)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope=None, cache=None) -> Tensor:
        h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)
        return h + self.ffn(self.ffn_norm(h))


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int, n_layers: int,
                 d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([DecoderBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers)])
        self.norm = impl.norms.RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        cos, sin = impl.rope.rope_angles(max_len, d_model // n_heads, rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def new_caches(self) -> list:
        return [impl.kv_cache.KVCache() for _ in self.blocks]

    def forward(self, idx: Tensor, caches=None) -> Tensor:
        start = 0 if caches is None else len(caches[0])
        T = idx.shape[1]
        if start + T > self.max_len:
            raise ValueError(f"TinyLM: positions up to {start + T - 1} reach max_len {self.max_len}")
        x = self.tok_emb(idx)
        mask = None if caches is not None else torch.ones(T, T, dtype=torch.bool, device=idx.device).tril()
        for i, block in enumerate(self.blocks):
            x = block(x, mask, rope=(self.rope_cos, self.rope_sin), cache=None if caches is None else caches[i])
        return self.head(self.norm(x))
