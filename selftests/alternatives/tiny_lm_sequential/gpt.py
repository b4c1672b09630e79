"""Correct alternative: the block's branches applied in a loop over (norm, layer) pairs, the caches handed
out by an iterator, the causal mask from causal_mask's own tril spelled with torch.tril, keyword calls."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, bias=False)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model=d_model, d_ff=d_ff)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        branches = (
            (self.attn_norm, lambda t: self.attn(t, mask, rope=rope, cache=cache)),
            (self.ffn_norm, self.ffn),
        )
        for norm, layer in branches:
            x = x + layer(norm(x))
        return x


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.tok_emb = nn.Embedding(num_embeddings=vocab_size, embedding_dim=d_model)
        self.blocks = nn.ModuleList(
            DecoderBlock(d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, d_ff=d_ff) for _ in range(n_layers))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(in_features=d_model, out_features=vocab_size, bias=False)
        cos, sin = rope_angles(max_len=max_len, head_dim=d_model // n_heads, base=rope_base)
        self.register_buffer("freqs_cos", cos.contiguous(), persistent=False)
        self.register_buffer("freqs_sin", sin.contiguous(), persistent=False)

    def new_caches(self) -> list[KVCache]:
        return [KVCache() for _block in self.blocks]

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        T = idx.shape[-1]
        cached = 0 if caches is None else len(caches[0])
        if cached + T - 1 >= self.max_len:
            raise ValueError(f"the last position, {cached + T - 1}, must be below max_len {self.max_len}")
        h = self.tok_emb(idx)
        if caches is None:
            mask, given = torch.tril(torch.ones((T, T), dtype=torch.bool, device=idx.device)), iter(())
        else:
            mask, given = None, iter(caches)
        for block in self.blocks:
            h = block(h, mask=mask, rope=(self.freqs_cos, self.freqs_sin), cache=next(given, None))
        return self.head(self.norm(h))
