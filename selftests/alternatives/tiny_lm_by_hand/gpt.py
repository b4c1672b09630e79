"""Correct alternative: TinyLM written by hand around its parts: the layers zipped with their caches, the
mask from comparing positions, the tables kept in float64, the embedding and the head as F.embedding and a
matrix product, the max_len test on the last position."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps=eps)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads)
        self.ffn_norm = RMSNorm(d_model, eps=eps)
        self.ffn = SwiGLU(d_model, d_ff)

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        attended = self.attn(self.attn_norm(x), mask=mask, rope=rope, cache=cache)
        h = attended + x
        return self.ffn(self.ffn_norm(h)) + h


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size, self.max_len = vocab_size, max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList([DecoderBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers)])
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        tables = rope_angles(max_len, d_model // n_heads, base=rope_base)
        for name, table in zip(("rope_cos", "rope_sin"), tables):
            self.register_buffer(name, table.double(), persistent=False)

    def new_caches(self) -> list[KVCache]:
        return list(map(lambda _: KVCache(), range(len(self.blocks))))

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        start = len(caches[0]) if caches is not None else 0
        positions = torch.arange(start, start + idx.size(1), device=idx.device)
        if positions.numel() and int(positions[-1]) >= self.max_len:
            raise ValueError(f"position {int(positions[-1])} is beyond max_len {self.max_len}")
        mask = None
        if caches is None:
            mask = positions[None, :] <= positions[:, None]  # key j visible from query i when j <= i
        x = F.embedding(idx, self.tok_emb.weight)
        for block, cache in zip(self.blocks, caches if caches is not None else [None] * len(self.blocks)):
            x = block(x, mask, rope=(self.rope_cos, self.rope_sin), cache=cache)
        return self.norm(x) @ self.head.weight.T
