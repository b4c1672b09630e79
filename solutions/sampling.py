"""Decoding: temperature, top-k, top-p and generation with a KV cache (reference solution)."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def filter_logits(
    logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None
) -> Tensor:
    """(..., V) -> (..., V): logits / temperature, with -inf outside the top-k and the top-p nucleus."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be at least 1, got {top_k}")
    if top_p is not None and not 0 < top_p <= 1:
        raise ValueError(f"top_p must lie in (0, 1], got {top_p}")
    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:  # top_p = 1 keeps all, even where 1 - p rounds to 1
        probs = logits.softmax(dim=-1)
        # mass strictly more probable than each token: sum of p_j over p_j > p_i
        above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)  # (..., V)
        logits = logits.masked_fill(above >= top_p, float("-inf"))
    return logits


def sample_next_token(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """(B, V) -> int64 (B,): greedy for temperature 0, else one draw per row from the filtered softmax."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    probs = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).softmax(dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


@torch.no_grad()
def generate(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 0.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """(B, T) prompt -> (B, T + max_new_tokens): the prompt once, then one new token per call."""
    if max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must not be negative, got {max_new_tokens}")
    if idx.size(1) + max_new_tokens > model.max_len:
        raise ValueError(f"{idx.size(1)} + {max_new_tokens} tokens exceed the model's max_len {model.max_len}")
    caches = model.new_caches()
    out, step = idx, idx
    for _ in range(max_new_tokens):
        logits = model(step, caches=caches)[:, -1]  # (B, V)
        step = sample_next_token(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                 generator=generator)[:, None]  # (B, 1)
        out = torch.cat([out, step], dim=1)
    return out
