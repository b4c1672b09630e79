"""The known mistakes of `dpo_loss` (sequence_logprobs and DPO's sigmoid loss): its entries and bundles (see
`checklib/mistakes/__init__.py`). Each model computes in float64 from the check's own inputs."""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised


class _Seq(NamedTuple):
    """A sequence_logprobs case in float64: log p (B, T, V), the labels made valid (B, T), the mask."""

    logits: Tensor
    logp: Tensor
    labels: Tensor
    mask: Tensor


def _picked(logp: Tensor, labels: Tensor) -> Tensor:
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def _shifted_inside(c: _Seq) -> Tensor:
    return torch.where(c.mask[:, 1:], _picked(c.logp[:, :-1], c.labels[:, 1:]), 0.0).sum(-1)


def _masked(c: _Seq, values: Tensor) -> Tensor:
    return torch.where(c.mask, values, 0.0)


SEQUENCE_MISTAKES = (
    mistake("dpo_loss", "shifted_inside",
            "your sequence_logprobs shifts inside (logits[:, :-1] against labels[:, 1:], as TRL's get_batch_logps "
            "does): here the caller has shifted already, so logits[:, t] scores labels[:, t]", _shifted_inside),
    mistake("dpo_loss", "masked_terms_kept",
            "your sequence_logprobs made the labels under a False mask valid but kept their terms in the sum: "
            "zero them (torch.where(mask, picked, 0)) before summing over T",
            lambda c: _picked(c.logp, c.labels).sum(-1)),
    mistake("dpo_loss", "mask_inverted",
            "your sequence_logprobs sums the positions where mask is False: True marks the positions that count",
            lambda c: torch.where(~c.mask, _picked(c.logp, c.labels), 0.0).sum(-1)),
    mistake("dpo_loss", "masked_mean_not_sum",
            "your sequence_logprobs averages over the masked positions (TRL's average_log_prob=True): the "
            "contract's is the sum, the log-probability of the whole answer",
            lambda c: _masked(c, _picked(c.logp, c.labels)).sum(-1) / c.mask.sum(-1).clamp(min=1)),
    mistake("dpo_loss", "mean_over_t",
            "your sequence_logprobs divides the masked sum by T: the log-probability of a sequence is the sum "
            "over its positions, no division", lambda c: _masked(c, _picked(c.logp, c.labels)).sum(-1) / c.mask.shape[1]),
    mistake("dpo_loss", "logits_not_log_softmax",
            "your sequence_logprobs sums the raw logits of the labels: take log_softmax over the vocabulary "
            "first", lambda c: _masked(c, _picked(c.logits, c.labels)).sum(-1)),
    mistake("dpo_loss", "probabilities_summed",
            "your sequence_logprobs sums probabilities (softmax) instead of log-probabilities (log_softmax)",
            lambda c: _masked(c, _picked(c.logp.exp(), c.labels)).sum(-1)),
    mistake("dpo_loss", "log_softmax_over_t",
            "your sequence_logprobs normalises over the sequence (dim=1) instead of over the vocabulary (dim=-1)",
            lambda c: _masked(c, _picked(torch.log_softmax(c.logits, 1), c.labels)).sum(-1)),
    mistake("dpo_loss", "sequence_logprobs_negated",
            "your sequence_logprobs has the wrong sign (a negative log-likelihood): it is the sum of "
            "+log p[label], never positive", lambda c: -_masked(c, _picked(c.logp, c.labels)).sum(-1)),
)
GATHERED_MASKED_LABELS = recognised(
    "dpo_loss", "gathered_masked_labels",
    "your sequence_logprobs indexes with the labels under a False mask (-100 there is no token, so gather "
    "fails on it): replace them first, torch.where(mask, labels, 0), then gather, then zero those terms")


def sequence_mistakes(logits: Tensor, labels: Tensor, mask: Tensor) -> Mistakes:
    logits = logits.double()
    c = _Seq(logits, torch.log_softmax(logits, -1), torch.where(mask, labels, 0), mask)  # masked labels made 0
    return bind(SEQUENCE_MISTAKES, c)


class _Pairs(NamedTuple):
    """A dpo_loss case in float64."""

    pc: Tensor
    pr: Tensor
    rc: Tensor
    rr: Tensor
    beta: float

    @property
    def margin(self) -> Tensor:
        return (self.pc - self.rc) - (self.pr - self.rr)


LOSS_MISTAKES = (
    mistake("dpo_loss", "log_of_sigmoid",
            "your loss is log(sigmoid(...)): the sigmoid underflows to 0 for a large negative margin and its log "
            "is -inf; use F.logsigmoid (or -F.softplus(-x))",
            lambda c: -torch.log(torch.sigmoid(c.beta * c.margin)).mean()),
    mistake("dpo_loss", "margin_sign_flipped",
            "your margin has the wrong sign (policy and reference swapped, or chosen and rejected swapped): it is "
            "(policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)",
            lambda c: -F.logsigmoid(-c.beta * c.margin).mean()),
    mistake("dpo_loss", "beta_missing", "your loss leaves beta out: -logsigmoid(beta * margin)",
            lambda c: -F.logsigmoid(c.margin).mean()),
    mistake("dpo_loss", "beta_twice",
            "your loss applies beta twice (to the log-ratios and again to their difference): beta multiplies the "
            "margin once", lambda c: -F.logsigmoid(c.beta ** 2 * c.margin).mean()),
    mistake("dpo_loss", "beta_outside",
            "your loss multiplies the logsigmoid by beta instead of its argument: -logsigmoid(beta * margin)",
            lambda c: -c.beta * F.logsigmoid(c.margin).mean()),
    mistake("dpo_loss", "loss_sum_not_mean", "your loss sums over the batch: it is the mean, as TRL's trainer averages it",
            lambda c: -F.logsigmoid(c.beta * c.margin).sum()),
    mistake("dpo_loss", "loss_no_minus",
            "your loss has no minus sign: it is -logsigmoid(beta * margin), which falls as the margin grows",
            lambda c: F.logsigmoid(c.beta * c.margin).mean()),
    mistake("dpo_loss", "sigmoid_not_logsigmoid",
            "your loss is -sigmoid(beta * margin): DPO's is -logsigmoid(beta * margin), the log of it",
            lambda c: -torch.sigmoid(c.beta * c.margin).mean()),
    mistake("dpo_loss", "reference_ignored",
            "your margin leaves the reference out (policy_chosen - policy_rejected): each side is a log-ratio, "
            "policy minus reference", lambda c: -F.logsigmoid(c.beta * (c.pc - c.pr)).mean()),
    mistake("dpo_loss", "reference_added",
            "your log-ratios add the reference instead of subtracting it: policy - ref",
            lambda c: -F.logsigmoid(c.beta * ((c.pc + c.rc) - (c.pr + c.rr))).mean()),
    mistake("dpo_loss", "hinge_loss",
            "your loss is the hinge loss, relu(1 - beta * margin) (TRL's loss_type=\"hinge\"): the sigmoid loss is "
            "-logsigmoid(beta * margin)", lambda c: torch.relu(1 - c.beta * c.margin).mean()),
    mistake("dpo_loss", "ipo_loss",
            "your loss is IPO's, (margin - 1 / (2 * beta)) ** 2: DPO's sigmoid loss is -logsigmoid(beta * margin)",
            lambda c: ((c.margin - 1 / (2 * c.beta)) ** 2).mean()),
    mistake("dpo_loss", "mean_inside",
            "your loss averages the margins before the logsigmoid: take -logsigmoid of each pair's margin, then "
            "the mean", lambda c: -F.logsigmoid(c.beta * c.margin.mean())),
)


def loss_mistakes(pc: Tensor, pr: Tensor, rc: Tensor, rr: Tensor, beta: float) -> Mistakes:
    c = _Pairs(pc.double(), pr.double(), rc.double(), rr.double(), beta)
    return bind(LOSS_MISTAKES, c)


REWARD_MISTAKES = (
    mistake("dpo_loss", "rewards_without_beta", "your rewards leave beta out: beta * (policy - ref)",
            lambda c, chosen: (c.pc - c.rc) if chosen else (c.pr - c.rr)),
    mistake("dpo_loss", "rewards_negated", "your rewards are beta * (ref - policy): the reward is beta * (policy - ref)",
            lambda c, chosen: c.beta * ((c.rc - c.pc) if chosen else (c.rr - c.pr))),
    mistake("dpo_loss", "rewards_swapped",
            "your chosen and rejected rewards are swapped: chosen_rewards comes from policy_chosen and ref_chosen",
            lambda c, chosen: c.beta * ((c.pr - c.rr) if chosen else (c.pc - c.rc))),
    mistake("dpo_loss", "rewards_policy_only",
            "your rewards leave the reference out: beta * (policy - ref), not beta * policy",
            lambda c, chosen: c.beta * (c.pc if chosen else c.pr)),
)
REWARDS_ATTACHED = recognised(
    "dpo_loss", "rewards_attached",
    "your rewards are still attached to the graph: return them .detach()ed (they are for logging; a gradient "
    "through them would train on them)")


def reward_mistakes(pc: Tensor, pr: Tensor, rc: Tensor, rr: Tensor, beta: float, chosen: bool) -> Mistakes:
    c = _Pairs(pc.double(), pr.double(), rc.double(), rr.double(), beta)
    return bind(REWARD_MISTAKES, c, chosen)


LABELS_CHANGED_IN_PLACE = mistake(
    "dpo_loss", "labels_changed_in_place",
    "your sequence_logprobs overwrote the caller's labels under the False mask in place (labels[~mask] = 0, "
    "masked_fill_): make a new tensor, torch.where(mask, labels, 0)",
    lambda labels, mask: torch.where(mask, labels, 0))


def labels_in_place_mistakes(labels: Tensor, mask: Tensor) -> Mistakes:
    return bind([LABELS_CHANGED_IN_PLACE], labels, mask)
