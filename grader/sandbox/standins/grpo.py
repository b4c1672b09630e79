"""Stand-in for grpo_loss: group_advantages, grpo_loss."""
from __future__ import annotations

import torch
from torch import Tensor


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError("group_size must be at least 2 and divide the number of rewards")
    groups = rewards.reshape(-1, group_size)
    return ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + eps)).reshape(rewards.shape)


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    a = advantages[:, None]
    ratio = torch.exp(logps - old_logps)
    clipped = torch.where(a >= 0, torch.clamp(ratio, max=1 + clip_eps), torch.clamp(ratio, min=1 - clip_eps))
    d = ref_logps - logps
    per_token = beta * (torch.exp(d) - d - 1) - clipped * a
    m = mask.to(per_token.dtype)
    return ((per_token * m).sum(1) / m.sum(1).clamp(min=1)).mean()
