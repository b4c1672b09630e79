"""A correct alternative: top-k through kthvalue, top-p as a probability threshold found over each row's
distinct probabilities, Gumbel-max draws (argmax of the log-probabilities plus Gumbel noise from the
generator), and a generate that grows the sequence with torch.cat at every step."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def _nucleus_threshold(p: Tensor, top_p: float) -> Tensor:
    """The smallest probability of a row (V,) that the nucleus keeps."""
    values = torch.unique(p, sorted=True).flip(0)  # distinct probabilities, largest first
    mass = torch.stack([p[p == v].sum() for v in values])  # each group of equal probabilities
    before = torch.cumsum(mass, 0) - mass  # the mass strictly more probable than each group
    return values[before < top_p].min()


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    if temperature <= 0 or (top_k is not None and top_k < 1) or (top_p is not None and not 0.0 < top_p <= 1.0):
        raise ValueError(f"bad settings: temperature={temperature}, top_k={top_k}, top_p={top_p}")
    x = logits / temperature
    vocab = x.shape[-1]
    if top_k is not None and top_k < vocab:
        kth = torch.kthvalue(x, vocab - top_k + 1, dim=-1, keepdim=True).values  # the top_k-th largest
        x = torch.where(x >= kth, x, torch.full_like(x, float("-inf")))
    if top_p is not None:
        rows = x.reshape(-1, vocab)
        p = rows.softmax(-1)
        thresholds = torch.stack([_nucleus_threshold(row, top_p) for row in p]).unsqueeze(-1)
        x = torch.where(p >= thresholds, rows, torch.full_like(rows, float("-inf"))).reshape(x.shape)
    return x


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    if temperature == 0:
        return torch.argmax(logits, -1)
    logp = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).log_softmax(-1)
    u = torch.rand(logp.shape, generator=generator, dtype=torch.float64).clamp_(min=1e-300)
    gumbel = -torch.log(-torch.log(u))
    return torch.argmax(logp.double() + gumbel, dim=-1)


@torch.no_grad()
def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    if max_new_tokens < 0 or idx.size(-1) + max_new_tokens > model.max_len:
        raise ValueError(f"cannot generate {max_new_tokens} tokens after {idx.size(-1)} within {model.max_len}")
    seq = idx.clone()
    if max_new_tokens == 0:
        return seq
    caches = model.new_caches()
    logits = model(seq, caches=caches)
    for i in range(max_new_tokens):
        token = sample_next_token(logits[:, -1], temperature=temperature, top_k=top_k, top_p=top_p,
                                  generator=generator).view(-1, 1)
        seq = torch.cat((seq, token), dim=1)
        if i + 1 < max_new_tokens:
            logits = model(token, caches=caches)
    return seq
