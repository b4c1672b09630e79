"""A correct alignment.py written another way: one_hot instead of gather (no label ever indexes), softplus
instead of -logsigmoid, a loop over the groups with the variance written out, and the clipped surrogate as
torch.where on the advantage's sign with masked_fill and a float mask."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    if logits.ndim != 3 or tuple(labels.shape) != tuple(logits.shape[:2]) or tuple(mask.shape) != tuple(labels.shape):
        raise ValueError("labels and mask must both be logits.shape[:2]")
    logp = logits - torch.logsumexp(logits, dim=-1, keepdim=True)
    onehot = F.one_hot(labels.masked_fill(~mask, 0), logits.shape[-1]).to(logits.dtype)
    per_token = (logp * onehot).sum(-1)
    return per_token.masked_fill(~mask, 0.0).sum(-1)


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    shapes = {tuple(t.shape) for t in (policy_chosen, policy_rejected, ref_chosen, ref_rejected)}
    if len(shapes) != 1:
        raise ValueError(f"the four inputs have different shapes: {sorted(shapes)}")
    with torch.no_grad():
        chosen_rewards = beta * (policy_chosen - ref_chosen)
        rejected_rewards = beta * (policy_rejected - ref_rejected)
    z = beta * ((policy_chosen - policy_rejected) - (ref_chosen - ref_rejected))
    return F.softplus(-z).mean(), chosen_rewards, rejected_rewards


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    n = rewards.shape[0]
    if group_size < 2 or n % group_size != 0:
        raise ValueError("group_size must be >= 2 and divide len(rewards)")
    out = torch.empty_like(rewards)
    for start in range(0, n, group_size):
        group = rewards[start:start + group_size]
        centred = group - group.sum() / group_size
        std = torch.sqrt((centred ** 2).sum() / (group_size - 1))
        out[start:start + group_size] = centred / (std + eps)
    return out


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    a = advantages[:, None].expand_as(logps)
    ratio = (logps - old_logps).exp()
    bounded = torch.where(a >= 0, ratio.clamp(max=1 + clip_eps), ratio.clamp(min=1 - clip_eps))
    surrogate = bounded * a
    log_r = ref_logps - logps
    kl = log_r.exp() - log_r - 1
    per_token = (beta * kl - surrogate).masked_fill(~mask, 0.0)
    weights = mask.to(logps.dtype)
    return (per_token.sum(dim=-1) / weights.sum(dim=-1)).mean()
