"""Stand-in for tiny_lm: DecoderBlock, TinyLM, on the implementation's parts."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = impl.norms.RMSNorm(d_model, eps)
        self.attn = impl.gqa.GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)
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
