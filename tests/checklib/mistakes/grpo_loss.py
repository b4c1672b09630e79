"""The known mistakes of `grpo_loss` (group_advantages and GRPO's clipped loss): its entries and bundles (see
`checklib/mistakes/__init__.py`). Each model computes in float64 from the check's own inputs."""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake


def _std(g: Tensor, unbiased: bool = True) -> Tensor:
    return g.std(dim=1, keepdim=True, unbiased=unbiased)


ADVANTAGE_MISTAKES = (
    mistake("grpo_loss", "std_biased",
            "your std is the biased one (unbiased=False, or correction=0): GRPO as TRL computes it divides by "
            "torch.std's default, the unbiased std (n - 1)",
            lambda g, eps: (g - g.mean(1, keepdim=True)) / (_std(g, False) + eps)),
    mistake("grpo_loss", "eps_inside_sqrt",
            "your eps is inside the square root, sqrt(var + eps): it is added to the std, std + eps",
            lambda g, eps: (g - g.mean(1, keepdim=True)) / torch.sqrt(g.var(1, keepdim=True) + eps)),
    mistake("grpo_loss", "eps_missing",
            "your advantages divide by the std without eps: a group of equal rewards has std 0 and gives NaN",
            lambda g, eps: (g - g.mean(1, keepdim=True)) / _std(g)),
    mistake("grpo_loss", "whole_batch_statistics",
            "your advantages use the mean and std of the whole batch: each reward is compared with its own "
            "group's (view(-1, group_size), then mean and std over dim=1)",
            lambda g, eps: (g - g.mean()) / (g.std() + eps)),
    mistake("grpo_loss", "batch_std",
            "your advantages divide by the std of the whole batch: the std is each group's own, as the mean is",
            lambda g, eps: (g - g.mean(1, keepdim=True)) / (g.std() + eps)),
    mistake("grpo_loss", "groups_interleaved",
            "your groups are interleaved (view(group_size, -1), or rewards[g::G]): prompt g's answers are the "
            "consecutive rewards[g * group_size:(g + 1) * group_size], so view(-1, group_size)",
            lambda g, eps: _interleaved(g, eps)),
    mistake("grpo_loss", "not_scaled",
            "your advantages only subtract the group's mean (Dr. GRPO's scale_rewards=False): the contract's "
            "divide by the group's std plus eps too", lambda g, eps: g - g.mean(1, keepdim=True)),
    mistake("grpo_loss", "mean_not_subtracted",
            "your advantages divide the rewards by the std without subtracting the group's mean first",
            lambda g, eps: g / (_std(g) + eps)),
    mistake("grpo_loss", "eps_argument_ignored",
            "your advantages ignore the eps argument (a value written into the code): use the eps given",
            lambda g, eps: (g - g.mean(1, keepdim=True)) / (_std(g) + 1e-4) if eps != 1e-4 else None),
)


def _interleaved(g: Tensor, eps: float) -> Tensor | None:
    n, size = g.shape
    if n < 2:
        return None
    inter = g.reshape(size, n)  # the rewards viewed (group_size, G): a "group" is a column, rewards[g::G]
    a = (inter - inter.mean(0, keepdim=True)) / (inter.std(0, keepdim=True) + eps)
    return a.reshape(n, size)


def advantage_mistakes(rewards: Tensor, group_size: int, eps: float) -> Mistakes:
    g = rewards.double().reshape(-1, group_size)
    return {known: (lambda m=model: _flat(m())) for known, model in bind(ADVANTAGE_MISTAKES, g, eps).items()}


def _flat(t: Tensor | None) -> Tensor | None:
    return None if t is None else t.reshape(-1)


class _Tokens(NamedTuple):
    """A grpo_loss case in float64."""

    logps: Tensor
    old: Tensor
    ref: Tensor
    a: Tensor  # (B, 1)
    mask: Tensor
    clip: float
    beta: float

    @property
    def ratio(self) -> Tensor:
        return torch.exp(self.logps - self.old)

    def clipped(self) -> Tensor:
        return torch.clamp(self.ratio, 1 - self.clip, 1 + self.clip)

    def surrogate(self) -> Tensor:
        return torch.min(self.ratio * self.a, self.clipped() * self.a)

    def k3(self) -> Tensor:
        d = self.ref - self.logps
        return torch.exp(d) - d - 1

    def seq_mean(self, per_token: Tensor) -> Tensor:
        m = self.mask.double()
        return ((per_token * m).sum(1) / m.sum(1)).mean()


def _loss(c: _Tokens, surrogate: Tensor | None = None, kl: Tensor | None = None, sign: float = 1.0) -> Tensor:
    s = c.surrogate() if surrogate is None else surrogate
    k = c.k3() if kl is None else kl
    return c.seq_mean(-(s - sign * c.beta * k))


def _with_ratio(c: _Tokens, ratio: Tensor) -> Tensor:
    return torch.min(ratio * c.a, torch.clamp(ratio, 1 - c.clip, 1 + c.clip) * c.a)


LOSS_MISTAKES = (
    mistake("grpo_loss", "max_not_min",
            "your surrogate takes the max of the two terms: PPO's is the min, the pessimistic one, so that "
            "clipping can only lower the objective",
            lambda c: _loss(c, torch.max(c.ratio * c.a, c.clipped() * c.a))),
    mistake("grpo_loss", "advantage_clamped",
            "your clamp is applied to ratio * A (or to A) instead of to the ratio alone: clamp(ratio, 1 - clip_eps, "
            "1 + clip_eps) * A", lambda c: _loss(c, torch.min(c.ratio * c.a, torch.clamp(c.ratio * c.a, 1 - c.clip,
                                                                                           1 + c.clip)))),
    mistake("grpo_loss", "no_clipping", "your surrogate is ratio * A with no clipped term: min(ratio * A, "
            "clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)", lambda c: _loss(c, c.ratio * c.a)),
    mistake("grpo_loss", "clip_one_sided",
            "your clamp bounds the ratio on one side only (max=1 + clip_eps): for a negative advantage the lower "
            "bound 1 - clip_eps is the one that counts",
            lambda c: _loss(c, torch.min(c.ratio * c.a, torch.clamp(c.ratio, max=1 + c.clip) * c.a))),
    mistake("grpo_loss", "kl_sign_flipped",
            "your KL penalty has the wrong sign: loss_t = -(surrogate - beta * kl), the KL adds to the loss",
            lambda c: _loss(c, sign=-1.0)),
    mistake("grpo_loss", "k1_not_k3",
            "your KL is the k1 estimator, logps - ref_logps: GRPO's is k3, exp(ref - logps) - (ref - logps) - 1",
            lambda c: _loss(c, kl=c.logps - c.ref)),
    mistake("grpo_loss", "k2_not_k3",
            "your KL is the k2 estimator, (logps - ref_logps) ** 2 / 2: GRPO's is k3, exp(ref - logps) - "
            "(ref - logps) - 1", lambda c: _loss(c, kl=(c.logps - c.ref) ** 2 / 2)),
    mistake("grpo_loss", "k3_reversed",
            "your k3 has its difference reversed, d = logps - ref_logps: it is d = ref_logps - logps in "
            "exp(d) - d - 1", lambda c: _loss(c, kl=torch.exp(c.logps - c.ref) - (c.logps - c.ref) - 1)),
    mistake("grpo_loss", "k3_without_minus_one",
            "your k3 forgets the - 1: exp(d) - d - 1, which is 0 where the policy equals the reference",
            lambda c: _loss(c, kl=c.k3() + 1)),
    mistake("grpo_loss", "kl_missing", "your loss leaves the KL penalty out: - beta * kl",
            lambda c: c.seq_mean(-c.surrogate())),
    mistake("grpo_loss", "token_mean",
            "your loss averages over every masked token of the batch at once (DAPO's token-level mean): GRPO "
            "averages each sequence over its own tokens, then the sequences",
            lambda c: (-(c.surrogate() - c.beta * c.k3()) * c.mask).sum() / c.mask.sum()),
    mistake("grpo_loss", "divided_by_t",
            "your per-sequence mean divides by T, not by the number of True in the row's mask",
            lambda c: ((-(c.surrogate() - c.beta * c.k3()) * c.mask).sum(1) / c.mask.shape[1]).mean()),
    mistake("grpo_loss", "mask_ignored",
            "your loss averages over every token, the masked-out ones too: mask the tokens first",
            lambda c: (-(c.surrogate() - c.beta * c.k3())).mean()),
    mistake("grpo_loss", "sequence_sum",
            "your loss sums each sequence over its tokens instead of averaging: divide by the row's number of True",
            lambda c: ((-(c.surrogate() - c.beta * c.k3()) * c.mask).sum(1)).mean()),
    mistake("grpo_loss", "loss_not_negated",
            "your loss is the objective itself, surrogate - beta * kl: the loss to minimise is its negative",
            lambda c: -_loss(c)),
    mistake("grpo_loss", "ratio_inverted", "your ratio is exp(old_logps - logps): it is exp(logps - old_logps)",
            lambda c: _loss(c, _with_ratio(c, torch.exp(c.old - c.logps)))),
    mistake("grpo_loss", "ratio_without_exp",
            "your ratio is logps - old_logps, a log-ratio: the ratio is its exp",
            lambda c: _loss(c, _with_ratio(c, c.logps - c.old))),
    mistake("grpo_loss", "ratio_against_reference",
            "your ratio divides by the reference, exp(logps - ref_logps): it is against the policy that sampled "
            "the answers, exp(logps - old_logps)", lambda c: _loss(c, _with_ratio(c, torch.exp(c.logps - c.ref)))),
    mistake("grpo_loss", "kl_against_old",
            "your KL compares with old_logps: the penalty keeps the policy near the reference, ref_logps",
            lambda c: _loss(c, kl=torch.exp(c.old - c.logps) - (c.old - c.logps) - 1)),
)


def loss_mistakes(logps, old, ref, advantages, mask, clip_eps, beta) -> Mistakes:
    c = _Tokens(logps.double(), old.double(), ref.double(), advantages.double()[:, None], mask, clip_eps, beta)
    return bind(LOSS_MISTAKES, c)


def _gradient(c: _Tokens, surrogate_grad: bool, kl_grad: bool) -> Tensor:
    x = c.logps.clone().requires_grad_(True)
    d = c.ref - x
    ratio = torch.exp(x - c.old)
    s = torch.min(ratio * c.a, torch.clamp(ratio, 1 - c.clip, 1 + c.clip) * c.a)
    k = torch.exp(d) - d - 1
    s = s if surrogate_grad else s.detach()
    k = k if kl_grad else k.detach()
    loss = c.seq_mean(-(s - c.beta * k))
    if not loss.requires_grad:
        return torch.zeros_like(x)
    loss.backward()
    return x.grad


GRADIENT_MISTAKES = (
    mistake("grpo_loss", "ratio_detached",
            "no gradient flows through your ratio (.detach(), .item() or torch.no_grad()): the surrogate trains "
            "the policy through exp(logps - old_logps)", lambda c: _gradient(c, False, True)),
    mistake("grpo_loss", "kl_detached",
            "no gradient flows through your KL penalty (it was detached): the penalty pulls logps toward the "
            "reference only through its gradient", lambda c: _gradient(c, True, False)),
)


def gradient_mistakes(logps, old, ref, advantages, mask, clip_eps, beta) -> Mistakes:
    c = _Tokens(logps.double(), old.double(), ref.double(), advantages.double()[:, None], mask, clip_eps, beta)
    return bind(GRADIENT_MISTAKES, c)


REWARDS_NORMALISED_IN_PLACE = mistake(
    "grpo_loss", "rewards_normalised_in_place",
    "your group_advantages normalised the caller's rewards in place (a view of them, then -= and /=): compute a "
    "new tensor, (grouped - mean) / (std + eps)",
    lambda rewards, group_size, eps: _flat((lambda g: (g - g.mean(1, keepdim=True)) / (_std(g) + eps))(
        rewards.double().reshape(-1, group_size))))


def rewards_in_place_mistakes(rewards: Tensor, group_size: int, eps: float) -> Mistakes:
    return bind([REWARDS_NORMALISED_IN_PLACE], rewards, group_size, eps)
