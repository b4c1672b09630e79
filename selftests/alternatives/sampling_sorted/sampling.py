"""A correct alternative: top-k and top-p by sorting (a shifted cumulative sum, scattered back, with the
ties at the boundary kept), draws by inverting the cumulative distribution of one uniform per row, and a
generate that collects the tokens in a list."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    if top_k is not None and top_k < 1:
        raise ValueError(f"top_k must be >= 1, got {top_k}")
    if top_p is not None and (top_p <= 0 or top_p > 1):
        raise ValueError(f"top_p must be in (0, 1], got {top_p}")
    scaled = logits / temperature
    ordered, order = scaled.sort(dim=-1, descending=True)
    remove = torch.zeros_like(ordered, dtype=torch.bool)
    if top_k is not None and top_k < scaled.shape[-1]:
        remove |= ordered < ordered[..., top_k - 1:top_k]
    if top_p is not None:
        probs = ordered.masked_fill(remove, float("-inf")).softmax(dim=-1)
        before = probs.cumsum(dim=-1) - probs  # the mass sorted ahead of each token
        last_kept = (before < top_p).sum(-1, keepdim=True) - 1  # the nucleus is a prefix of the sorted order
        threshold = probs.gather(-1, last_kept)
        remove |= probs < threshold  # tokens tied with the last kept one stay
    return scaled.masked_fill(torch.zeros_like(remove).scatter(-1, order, remove), float("-inf"))


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    probs = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).softmax(dim=-1)
    cdf = probs.cumsum(dim=-1)
    u = torch.rand(probs.shape[0], 1, generator=generator, dtype=probs.dtype) * cdf[:, -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp(max=probs.shape[-1] - 1)


@torch.no_grad()
def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    if max_new_tokens < 0:
        raise ValueError("max_new_tokens must be >= 0")
    if idx.shape[1] + max_new_tokens > model.max_len:
        raise ValueError("the prompt and the new tokens do not fit in model.max_len")
    caches = model.new_caches()
    tokens: list[Tensor] = []
    feed = idx
    while len(tokens) < max_new_tokens:
        nxt = sample_next_token(model(feed, caches=caches)[:, -1, :], temperature=temperature, top_k=top_k,
                                top_p=top_p, generator=generator)
        tokens.append(nxt)
        feed = nxt.unsqueeze(1)
    return torch.cat([idx, *(t.unsqueeze(1) for t in tokens)], dim=1)
