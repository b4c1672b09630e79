"""Stand-in for optimizer: AdamW, clip_grad_norm."""
from __future__ import annotations

import torch


class AdamW(torch.optim.AdamW):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=False)


def clip_grad_norm(parameters, max_norm: float) -> torch.Tensor:
    return torch.nn.utils.clip_grad_norm_(list(parameters), max_norm)
