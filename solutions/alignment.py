"""Aligning a language model with preferences: the DPO and GRPO losses, as TRL computes them (reference solution)."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """(B, T, V) logits, (B, T) labels and mask -> (B,): sum over the masked positions of log p[label]."""
    if logits.dim() != 3 or labels.shape != logits.shape[:2] or mask.shape != labels.shape:
        raise ValueError(f"need logits (B, T, V) with labels and mask (B, T), got logits {tuple(logits.shape)}, "
                         f"labels {tuple(labels.shape)}, mask {tuple(mask.shape)}")
    logp = torch.log_softmax(logits, dim=-1)
    safe = torch.where(mask, labels, torch.zeros_like(labels))  # labels under a False mask may be -100
    picked = logp.gather(-1, safe.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return torch.where(mask, picked, torch.zeros_like(picked)).sum(dim=-1)


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    """DPO's sigmoid loss (mean over the batch) and the implicit rewards of the chosen and rejected answers."""
    if not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape):
        raise ValueError("the four log-probability tensors must have the same shape")
    chosen_logratios = policy_chosen - ref_chosen
    rejected_logratios = policy_rejected - ref_rejected
    logits = chosen_logratios - rejected_logratios
    loss = -F.logsigmoid(beta * logits).mean()
    chosen_rewards = beta * chosen_logratios.detach()
    rejected_rewards = beta * rejected_logratios.detach()
    return loss, chosen_rewards, rejected_rewards


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """Each reward minus its group's mean, over its group's (unbiased) standard deviation plus eps."""
    if group_size < 2 or rewards.numel() % group_size:
        raise ValueError(f"need group_size >= 2 dividing the number of rewards, got group_size={group_size} "
                         f"for {rewards.numel()} rewards")
    grouped = rewards.view(-1, group_size)  # (G, group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    std = grouped.std(dim=1, keepdim=True)
    return ((grouped - mean) / (std + eps)).view(-1)


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    """GRPO's clipped surrogate with a k3 KL penalty, per-sequence masked mean, then the batch mean."""
    adv = advantages.unsqueeze(1)  # (B, 1): one advantage per sequence
    ratio = torch.exp(logps - old_logps)
    surrogate = torch.min(ratio * adv, torch.clamp(ratio, 1 - clip_eps, 1 + clip_eps) * adv)
    kl = torch.exp(ref_logps - logps) - (ref_logps - logps) - 1
    per_token = -(surrogate - beta * kl)
    per_sequence = (per_token * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
    return per_sequence.mean()
