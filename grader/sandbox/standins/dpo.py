"""Stand-in for dpo_loss: sequence_logprobs, dpo_loss."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    if logits.dim() != 3 or labels.shape != logits.shape[:2] or mask.shape != labels.shape:
        raise ValueError("labels and mask must be logits.shape[:2]")
    picked = torch.log_softmax(logits, -1).gather(-1, labels.masked_fill(~mask, 0).unsqueeze(-1)).squeeze(-1)
    return picked.masked_fill(~mask, 0).sum(-1)


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    if not (policy_chosen.shape == policy_rejected.shape == ref_chosen.shape == ref_rejected.shape):
        raise ValueError("the four log-probability tensors must have one shape")
    chosen, rejected = policy_chosen - ref_chosen, policy_rejected - ref_rejected
    loss = F.softplus(-beta * (chosen - rejected)).mean()
    return loss, (beta * chosen).detach(), (beta * rejected).detach()
