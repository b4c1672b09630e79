"""Trusted stand-ins for the kit's contract, built from PyTorch's own operations.

When the checks of one component run, every other component's code is replaced
by these, so a bug costs points only in the component where it lives. They are
grader code: they never come from `solutions/`.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor

# A student release replaces this module by one that holds only RecordingKVCache
# and COMPLETE = False: there, nothing is swapped in and components are graded in context.
COMPLETE = True


def split_heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    batch, heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, heads * d_head)


def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    return torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))


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


def scaled_dot_product_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None):
    weights = F.softmax(apply_mask(attention_scores(q, k), mask), dim=-1)
    return torch.matmul(weights, v), weights


def _trusted_mha_init(self: nn.Module, d_model: int, n_heads: int, bias: bool = True) -> None:
    nn.Module.__init__(self)
    if d_model % n_heads:
        raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")
    self.last_attention = None
    _ensure_mha_layers(self, d_model, n_heads, bias)


def _ensure_mha_layers(self: nn.Module, d_model: int, n_heads: int, bias: bool) -> None:
    self.d_model, self.n_heads, self.d_k = d_model, n_heads, d_model // n_heads
    seen: list[nn.Module] = []
    for name in ("w_q", "w_k", "w_v", "out_proj"):
        layer = getattr(self, name, None)
        fits = (
            isinstance(layer, nn.Linear)
            and layer.weight.shape == (d_model, d_model)
            and (layer.bias is not None) == bias
            and not any(layer is other for other in seen)
        )
        seen.append(layer)
        if not fits:
            setattr(self, name, nn.Linear(d_model, d_model, bias=bias))


def trusted_mha_init(student_init):
    """Wrap a student's `MultiHeadAttention.__init__` so the contract's layers always exist."""

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        try:
            student_init(self, d_model, n_heads, bias)
        except Exception:
            _trusted_mha_init(self, d_model, n_heads, bias)
        _ensure_mha_layers(self, d_model, n_heads, bias)
        if not hasattr(self, "last_attention"):
            self.last_attention = None

    return __init__


def project_qkv(self: nn.Module, x: Tensor):
    return self.w_q(x), self.w_k(x), self.w_v(x)


class KVCache:
    def __init__(self) -> None:
        self._keys: list[Tensor] = []
        self._values: list[Tensor] = []

    def update(self, k: Tensor, v: Tensor):
        self._keys.append(k)
        self._values.append(v)
        return torch.cat(self._keys, dim=-2), torch.cat(self._values, dim=-2)

    def __len__(self) -> int:
        return sum(k.shape[-2] for k in self._keys)


class RecordingKVCache(KVCache):
    """A trusted cache that also keeps every `update` call's arguments for inspection."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Tensor, Tensor]] = []

    def update(self, k: Tensor, v: Tensor):
        self.calls.append((k.detach().clone(), v.detach().clone()))
        return super().update(k, v)

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        return list(self.calls)


class MultiHeadAttention(nn.Module):
    """Trusted multi-head attention with the contract's names, on PyTorch's fused kernel."""

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        _trusted_mha_init(self, d_model, n_heads, bias)

    project_qkv = project_qkv

    def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        q, k, v = (split_heads(t, self.n_heads) for t in self.project_qkv(x))
        if cache is not None:
            if mask is not None:
                raise ValueError("a mask cannot be given together with a cache")
            k, v = cache.update(k, v)
            mask = causal_mask(q.shape[-2], k.shape[-2], device=x.device)
        out, weights = scaled_dot_product_attention(q, k, v, mask)
        self.last_attention = weights.detach()
        return self.out_proj(merge_heads(out))


class TransformerBlock(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        super().__init__()
        self.attention = MultiHeadAttention(d_model, n_heads)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
        h = x + self.dropout(self.attention(self.norm1(x), mask, cache))
        return h + self.dropout(self.ff(self.norm2(h)))


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    if max_len <= 0 or d_model <= 0 or d_model % 2:
        raise ValueError(f"need positive max_len and even positive d_model, got {max_len}, {d_model}")
    positions = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    exponents = torch.arange(0, d_model, 2, dtype=torch.float64) / d_model
    angles = positions / torch.pow(10000.0, exponents)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).reshape(max_len, d_model).float()


def patchify(images: Tensor, patch_size: int) -> Tensor:
    if images.shape[-2] % patch_size or images.shape[-1] % patch_size:
        raise ValueError(f"image size {tuple(images.shape[-2:])} is not a multiple of {patch_size}")
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


class PatchEmbedding(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Linear(in_channels * patch_size**2, d_model)

    def forward(self, images: Tensor) -> Tensor:
        return self.proj(patchify(images, self.patch_size))
