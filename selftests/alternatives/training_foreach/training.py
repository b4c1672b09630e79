"""A correct alternative: softmax computed directly, cross-entropy through a one-hot mask, AdamW with
torch._foreach_* over each group, clipping with torch._foreach_norm, the cosine as cos²."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    z = (x - x.amax(dim, keepdim=True)).exp()
    return z / z.sum(dim, keepdim=True)


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    m = x.amax(dim, keepdim=True)
    return x - (m + torch.log(torch.sum(torch.exp(x - m), dim, keepdim=True)))


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    if targets.shape != logits.shape[:-1]:
        raise ValueError(f"shape mismatch: logits {tuple(logits.shape)}, targets {tuple(targets.shape)}")
    keep = targets != ignore_index  # (...)
    safe = torch.where(keep, targets, torch.zeros_like(targets))
    one_hot = F.one_hot(safe, logits.shape[-1]).to(logits.dtype)  # (..., V)
    nll = -(log_softmax(logits) * one_hot).sum(-1)  # (...)
    return (nll * keep).sum() / keep.sum()


class AdamW(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        if min(lr, eps, weight_decay) < 0 or not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError("invalid AdamW settings")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            grads, ms, vs, steps = [], [], [], []
            for p in params:
                state = self.state[p]
                if not state:
                    state.update(step=0, m=torch.zeros_like(p), v=torch.zeros_like(p))
                state["step"] += 1
                grads.append(p.grad)
                ms.append(state["m"])
                vs.append(state["v"])
                steps.append(state["step"])
            torch._foreach_mul_(params, 1 - lr * wd)
            torch._foreach_lerp_(ms, grads, 1 - b1)
            torch._foreach_mul_(vs, b2)
            torch._foreach_addcmul_(vs, grads, grads, 1 - b2)
            denom = torch._foreach_div(vs, [1 - b2**t for t in steps])
            torch._foreach_sqrt_(denom)
            torch._foreach_add_(denom, eps)
            torch._foreach_addcdiv_(params, ms, denom, [-lr / (1 - b1**t) for t in steps])
        return loss


def clip_grad_norm(parameters, max_norm: float) -> Tensor:
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
    torch._foreach_mul_(grads, torch.clamp(max_norm / (norm + 1e-6), max=1.0))
    return norm


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    if step < 0 or warmup_steps < 0 or total_steps <= warmup_steps:
        raise ValueError("lr_at needs step >= 0 and 0 <= warmup_steps < total_steps")
    if step >= warmup_steps:
        progress = min(step - warmup_steps, total_steps - warmup_steps) / (total_steps - warmup_steps)
        return min_lr + (max_lr - min_lr) * math.cos(math.pi * progress / 2) ** 2
    return max_lr * (step / warmup_steps)
