"""A correct alternative: log-sum-exp by hand, softmax as exp(log_softmax), indexing with arange,
AdamW's moments under torch's own state names, clipping from the sum of squares."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _logsumexp(x: Tensor, dim: int) -> Tensor:
    m = x.max(dim=dim, keepdim=True).values
    return m + (x - m).exp().sum(dim=dim, keepdim=True).log()


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    return x - _logsumexp(x, dim)


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    return log_softmax(x, dim).exp()


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    if tuple(targets.shape) != tuple(logits.shape[:-1]):
        raise ValueError("targets must have the shape of logits without the class dimension")
    vocab = logits.shape[-1]
    logp = log_softmax(logits.reshape(-1, vocab), dim=1)
    flat = targets.reshape(-1)
    rows = torch.nonzero(flat != ignore_index).squeeze(1)
    return -logp[rows, flat[rows]].sum() / rows.numel()


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        for name, value in (("lr", lr), ("eps", eps), ("weight_decay", weight_decay)):
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
        for beta in betas:
            if not 0 <= beta < 1:
                raise ValueError(f"each beta must be in [0, 1), got {beta}")
        super().__init__(params, {"lr": lr, "betas": betas, "eps": eps, "weight_decay": weight_decay})

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        with torch.no_grad():
            for group in self.param_groups:
                beta1, beta2 = group["betas"]
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if "exp_avg" not in state:
                        state["step"], state["exp_avg"], state["exp_avg_sq"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                    state["step"] += 1
                    t = state["step"]
                    state["exp_avg"] = beta1 * state["exp_avg"] + (1 - beta1) * p.grad
                    state["exp_avg_sq"] = beta2 * state["exp_avg_sq"] + (1 - beta2) * p.grad * p.grad
                    m_hat = state["exp_avg"] / (1 - beta1**t)
                    v_hat = state["exp_avg_sq"] / (1 - beta2**t)
                    decayed = p * (1 - group["lr"] * group["weight_decay"])
                    p.copy_(decayed - group["lr"] * m_hat / (torch.sqrt(v_hat) + group["eps"]))
        return loss


def clip_grad_norm(parameters, max_norm: float) -> Tensor:
    grads = [p.grad for p in list(parameters) if p.grad is not None]
    total = torch.sqrt(sum((g * g).sum() for g in grads))
    if total > max_norm:
        scale = max_norm / (total + 1e-6)
        for g in grads:
            g.mul_(scale)
    return total


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    if step < 0:
        raise ValueError("step must be >= 0")
    if warmup_steps < 0:
        raise ValueError("warmup_steps must be >= 0")
    if total_steps <= warmup_steps:
        raise ValueError("total_steps must exceed warmup_steps")
    if step < warmup_steps:
        return step / warmup_steps * max_lr
    if step <= total_steps:
        progress = (step - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + (max_lr - min_lr) * (math.cos(math.pi * progress) + 1) / 2
    return min_lr
