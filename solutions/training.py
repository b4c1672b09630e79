"""Training a language model: softmax and cross-entropy, AdamW, gradient clipping, the schedule (reference solution)."""
from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
from torch import Tensor


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """log(softmax(x)) along `dim`, same shape; stable: x - max - log(sum(exp(x - max)))."""
    shifted = x - x.amax(dim=dim, keepdim=True)  # every entry <= 0, the largest exactly 0
    return shifted - torch.log(torch.exp(shifted).sum(dim=dim, keepdim=True))


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """exp(x) / sum(exp(x)) along `dim`, same shape; the maximum is subtracted first."""
    e = torch.exp(x - x.amax(dim=dim, keepdim=True))
    return e / e.sum(dim=dim, keepdim=True)


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    """logits (..., V), targets (...) int64 -> 0-dim mean of -log p[target] over the targets != ignore_index."""
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"targets {tuple(targets.shape)} must have the shape of logits without its last "
                         f"dimension, {tuple(logits.shape[:-1])}")
    logp = log_softmax(logits, dim=-1).reshape(-1, logits.size(-1))  # (N, V)
    targets = targets.reshape(-1)  # (N,)
    keep = targets != ignore_index  # (N,)
    picked = logp[keep].gather(1, targets[keep].unsqueeze(1)).squeeze(1)  # (N_kept,)
    return -picked.mean()


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter), step for step equal to torch.optim.AdamW."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        if lr < 0 or eps < 0 or weight_decay < 0:
            raise ValueError(f"lr, eps and weight_decay must not be negative, got {lr}, {eps}, {weight_decay}")
        if not all(0.0 <= b < 1.0 for b in betas):
            raise ValueError(f"betas must lie in [0, 1), got {betas}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:  # read at every step: a schedule may have changed lr
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["m"] = torch.zeros_like(p)
                    state["v"] = torch.zeros_like(p)
                state["step"] += 1
                t, m, v, g = state["step"], state["m"], state["v"], p.grad
                p.mul_(1 - lr * wd)  # decoupled: the decay never goes through m and v
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v / (1 - b2**t)).sqrt_().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - b1**t))
        return loss


def clip_grad_norm(parameters: Iterable[Tensor], max_norm: float) -> Tensor:
    """Scale every gradient in place by min(1, max_norm / (norm + 1e-6)); returns the total L2 norm before."""
    grads = [p.grad for p in parameters if p.grad is not None]  # the iterable is read once
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for g in grads:
        g.mul_(coef.to(g.dtype))
    return norm


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """Linear warmup from 0 to max_lr, cosine decay to min_lr at total_steps, then min_lr."""
    if step < 0 or warmup_steps < 0 or total_steps <= warmup_steps:
        raise ValueError(f"need step >= 0 and 0 <= warmup_steps < total_steps, got step={step}, "
                         f"warmup_steps={warmup_steps}, total_steps={total_steps}")
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step > total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 .. 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))
