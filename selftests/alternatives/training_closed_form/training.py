"""A correct alternative: take_along_dim and a weighted mean, AdamW's moments in a dict of its own and
the paper's folded bias correction, clipping from one concatenated vector, a clamped progress."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    shifted = x - x.max(dim, keepdim=True)[0].detach()
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return torch.exp(log_softmax(x, dim))


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    if list(targets.shape) != list(logits.shape)[:-1]:
        raise ValueError("targets and logits do not match")
    keep = (targets != ignore_index).to(logits.dtype)
    index = targets.masked_fill(targets == ignore_index, 0).unsqueeze(-1)
    picked = torch.take_along_dim(log_softmax(logits, -1), index, dim=-1).squeeze(-1)
    return -(picked * keep).sum() / keep.sum()


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        b1, b2 = betas
        if lr < 0.0 or eps < 0.0 or weight_decay < 0.0 or not 0.0 <= b1 < 1.0 or not 0.0 <= b2 < 1.0:
            raise ValueError(f"bad settings: lr={lr}, betas={betas}, eps={eps}, weight_decay={weight_decay}")
        super().__init__(params, dict(lr=lr, betas=(b1, b2), eps=eps, weight_decay=weight_decay))
        self.moments: dict[Tensor, list] = {}

    def step(self, closure=None):
        loss = None
        if closure:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            b1, b2 = group["betas"]
            for p in filter(lambda q: q.grad is not None, group["params"]):
                t, m, v = self.moments.get(p, (0, torch.zeros_like(p), torch.zeros_like(p)))
                g = p.grad.detach()
                t, m, v = t + 1, b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g.square()
                self.moments[p] = (t, m, v)
                c1, c2 = 1 - b1**t, 1 - b2**t
                # lr * (m / c1) / (sqrt(v / c2) + eps) with the corrections folded (Kingma & Ba, section 2)
                step_size = group["lr"] * math.sqrt(c2) / c1
                with torch.no_grad():
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                    p.sub_(step_size * m / (v.sqrt() + group["eps"] * math.sqrt(c2)))
        return loss


def clip_grad_norm(parameters, max_norm: float) -> Tensor:
    with_grad = [p for p in parameters if p.grad is not None]
    norm = torch.cat([p.grad.reshape(-1) for p in with_grad]).norm(2)
    factor = min(1.0, max_norm / (norm.item() + 1e-6))
    for p in with_grad:
        p.grad.mul_(factor)
    return norm


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    if not (step >= 0 and 0 <= warmup_steps < total_steps):
        raise ValueError(f"bad schedule arguments: step={step}, warmup_steps={warmup_steps}, total_steps={total_steps}")
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))
