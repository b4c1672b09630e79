"""Stand-in for sampling: filter_logits, sample_next_token, generate, by sorting."""
from __future__ import annotations

import torch
from torch import Tensor


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k=None, top_p=None) -> Tensor:
    if temperature <= 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0 < top_p <= 1):
        raise ValueError(f"filter_logits: temperature {temperature}, top_k {top_k}, top_p {top_p} out of range")
    logits = logits / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.sort(logits, dim=-1, descending=True).values[..., top_k - 1:top_k]
        logits = torch.where(logits >= kth, logits, float("-inf"))
    if top_p is not None and top_p < 1:
        probs = torch.softmax(logits, dim=-1)
        ordered = torch.sort(probs, dim=-1, descending=True).values
        # mass of the tokens strictly more probable than each token
        cum = torch.cumsum(ordered, dim=-1)
        rank = torch.searchsorted(-ordered.contiguous(), -probs.contiguous(), side="left")
        above = torch.where(rank > 0, cum.gather(-1, (rank - 1).clamp(min=0)), torch.zeros_like(probs))
        logits = torch.where(above < top_p, logits, float("-inf"))
    return logits


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k=None, top_p=None, generator=None) -> Tensor:
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p), dim=-1)
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


@torch.no_grad()
def generate(model, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0, top_k=None, top_p=None,
             generator=None) -> Tensor:
    if max_new_tokens < 0 or idx.shape[1] + max_new_tokens > model.max_len:
        raise ValueError(f"generate: {idx.shape[1]} + {max_new_tokens} tokens do not fit max_len {model.max_len}")
    caches, tokens, step = model.new_caches(), [idx], idx
    for _ in range(max_new_tokens):
        step = sample_next_token(model(step, caches=caches)[:, -1], temperature=temperature, top_k=top_k,
                                 top_p=top_p, generator=generator)[:, None]
        tokens.append(step)
    return torch.cat(tokens, dim=1)
