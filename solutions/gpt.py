"""A tiny LLaMA-style decoder-only language model (reference solution)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask
from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


class DecoderBlock(nn.Module):
    """Pre-norm block: h = x + attn(attn_norm(x)), then h + ffn(ffn_norm(h)); (B, T, D) -> (B, T, D)."""

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)
        return h + self.ffn(self.ffn_norm(h))


class TinyLM(nn.Module):
    """Token embedding, n_layers DecoderBlocks with RoPE, a final RMSNorm and a bias-free head."""

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        cos, sin = rope_angles(max_len, d_model // n_heads, rope_base)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def new_caches(self) -> list[KVCache]:
        return [KVCache() for _ in self.blocks]

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """idx (B, T) int64 -> logits (B, T, vocab_size)."""
        start = 0 if caches is None else len(caches[0])
        if start + idx.size(1) > self.max_len:
            raise ValueError(f"positions up to {start + idx.size(1) - 1} reach max_len {self.max_len}")
        x = self.tok_emb(idx)  # (B, T, D)
        rope = (self.rope_cos, self.rope_sin)
        mask = None if caches is not None else causal_mask(idx.size(1), device=idx.device)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, rope=rope, cache=None if caches is None else caches[i])
        return self.head(self.norm(x))
