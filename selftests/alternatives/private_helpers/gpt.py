"""Correct alternative: TinyLM with private helpers (buffers registered by a helper, the causal mask from
torch.triu, the start position from the caches), the blocks appended one by one, each branch a method."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


def _constant(module: nn.Module, name: str, value: Tensor) -> None:
    """A table that follows .to() but is not learned, so it stays out of the state dict."""
    module.register_buffer(name, value, persistent=False)


def _future(length: int, device) -> Tensor:
    """True above the diagonal: the positions a query may not see."""
    return torch.triu(torch.ones(length, length, device=device), diagonal=1).bool()


def _start(caches: list[KVCache] | None) -> int:
    return 0 if not caches else len(caches[0])


class DecoderBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(d_model, eps)
        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)
        self.ffn_norm = RMSNorm(d_model, eps)
        self.ffn = SwiGLU(d_model, d_ff)

    def _attend(self, x: Tensor, mask, rope, cache) -> Tensor:
        return self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)

    def _feed_forward(self, h: Tensor) -> Tensor:
        return self.ffn(self.ffn_norm(h))

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        x = x + self._attend(x, mask, rope, cache)
        return x + self._feed_forward(x)


class TinyLM(nn.Module):
    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_len = max_len
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(DecoderBlock(d_model, n_heads, n_kv_heads, d_ff))
        self.norm = RMSNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        cos, sin = rope_angles(max_len, d_model // n_heads, rope_base)
        _constant(self, "cos", cos)
        _constant(self, "sin", sin)

    def new_caches(self) -> list[KVCache]:
        caches = []
        for _ in self.blocks:
            caches.append(KVCache())
        return caches

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        start, length = _start(caches), idx.shape[1]
        if start + length > self.max_len:
            raise ValueError(f"{start} cached and {length} new positions do not fit max_len {self.max_len}")
        mask = None if caches is not None else ~_future(length, idx.device)
        x = self.tok_emb(idx)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, rope=(self.cos, self.sin), cache=caches[i] if caches is not None else None)
        return self.head(self.norm(x))
