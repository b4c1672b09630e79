"""A correct alternative: the filters written as loops over rows (top-k by counting larger entries, top-p
by summing the probabilities above each token), one torch.multinomial draw per row, and a generate that
writes into a preallocated output and feeds the last token too."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def _filter_row(row: Tensor, top_k: int | None, top_p: float | None) -> Tensor:
    keep = torch.ones_like(row, dtype=torch.bool)
    if top_k is not None:
        larger = (row.unsqueeze(0) > row.unsqueeze(1)).sum(1)  # how many entries beat each one
        keep &= larger < top_k
    if top_p is not None:
        p = torch.softmax(row.masked_fill(~keep, float("-inf")), 0)
        for i in range(row.numel()):
            if keep[i] and p[p > p[i]].sum() >= top_p:
                keep[i] = False
    return row.masked_fill(~keep, float("-inf"))


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    if temperature <= 0.0:
        raise ValueError("temperature must be positive")
    if top_k is not None and top_k <= 0:
        raise ValueError("top_k must be positive")
    if top_p is not None and not (0.0 < top_p <= 1.0):
        raise ValueError("top_p must be in (0, 1]")
    scaled = (logits / temperature).reshape(-1, logits.shape[-1])
    return torch.stack([_filter_row(row, top_k, top_p) for row in scaled]).reshape(logits.shape)


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    if temperature == 0.0:
        return logits.argmax(-1)
    probs = torch.softmax(filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p), -1)
    return torch.cat([torch.multinomial(row, 1, generator=generator) for row in probs])


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    batch, length = idx.shape
    if max_new_tokens < 0:
        raise ValueError("max_new_tokens < 0")
    if length + max_new_tokens > model.max_len:
        raise ValueError("too long for the model")
    out = torch.empty(batch, length + max_new_tokens, dtype=idx.dtype, device=idx.device)
    out[:, :length] = idx
    caches = model.new_caches()
    with torch.no_grad():
        logits = model(idx, caches=caches)[:, -1]
        for t in range(length, length + max_new_tokens):
            out[:, t] = sample_next_token(logits, temperature=temperature, top_k=top_k, top_p=top_p,
                                          generator=generator)
            if t + 1 < model.max_len:  # feeding the last token is allowed, where it fits
                logits = model(out[:, t:t + 1], caches=caches)[:, -1]
    return out
