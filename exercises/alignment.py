"""Aligning a language model with preferences: the DPO and GRPO losses.

Two components live here (the interview track):

- ``dpo_loss``: ``sequence_logprobs`` and ``dpo_loss``, Direct Preference
  Optimization's loss (Rafailov et al., 2023) as TRL's ``DPOTrainer`` computes it
  with ``loss_type="sigmoid"``;
- ``grpo_loss``: ``group_advantages`` and ``grpo_loss``, Group Relative Policy
  Optimization (DeepSeekMath, 2024) as TRL's ``GRPOTrainer`` computes it.

Both are losses over log-probabilities of whole answers or of their tokens; the
model that gives them is not part of the exercise. Write them from tensor
operations: ``torch.log_softmax``, ``F.logsigmoid``, ``F.softplus``, ``gather``
and ``torch.clamp`` are fine; the ``trl``, ``transformers`` and ``peft`` packages
are not.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def sequence_logprobs(logits: Tensor, labels: Tensor, mask: Tensor) -> Tensor:
    """The log-probability of each sequence's labels: ``(B, T, V), (B, T), (B, T) -> (B,)``.

    ``logits[b, t]`` scores ``labels[b, t]`` (no shift inside: for a causal
    language model the caller passes ``logits[:, :-1]`` and ``idx[:, 1:]``).
    The result, in the logits' dtype, is for each ``b`` the sum over the
    positions ``t`` where ``mask[b, t]`` is True of
    ``log_softmax(logits[b, t])[labels[b, t]]``: the log-probability the model
    gives the answer, the prompt and the padding left out by the mask.

    Where ``mask`` is False a label may be anything, ``-100`` included (the
    "ignore" label of Hugging Face's datasets): never use it as an index.
    ``gather`` with ``-100`` fails; replace those labels first (say by 0) and
    zero their terms afterwards. A row whose mask is all False sums nothing: 0.

    Raises ``ValueError`` (graded) if ``labels`` and ``mask`` are not
    ``logits.shape[:2]``.

    TODO (dpo_loss), in words:
      1. Check the shapes and raise ``ValueError`` as described above.
      2. ``log_softmax`` over the vocabulary (the last dimension).
      3. Replace the labels where ``mask`` is False by a valid index, then pick
         each position's label entry with ``gather`` on the last dimension.
      4. Keep the picked values where ``mask`` is True (0 elsewhere) and sum
         over ``T``.
    """
    raise NotImplementedError("dpo_loss: write sequence_logprobs")


def dpo_loss(policy_chosen: Tensor, policy_rejected: Tensor, ref_chosen: Tensor, ref_rejected: Tensor,
             beta: float = 0.1) -> tuple[Tensor, Tensor, Tensor]:
    """DPO's loss and implicit rewards: ``(loss, chosen_rewards, rejected_rewards)``.

    Each argument is a ``(B,)`` tensor of sequence log-probabilities
    (``sequence_logprobs``' results): of the chosen and the rejected answer to
    each prompt, under the policy being trained and under the frozen reference.
    DPO needs no reward model: its implicit reward of an answer is
    ``beta * (policy - ref)``, how much more likely the policy made it::

        chosen_rewards   = beta * (policy_chosen - ref_chosen)        # (B,), detached
        rejected_rewards = beta * (policy_rejected - ref_rejected)    # (B,), detached
        margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
        loss = mean(-logsigmoid(beta * margin))                       # 0-dim

    Why ``logsigmoid`` and not ``log(sigmoid(...))``? For a margin of ``-1e3``
    the sigmoid underflows to 0 and its log is ``-inf`` (and the gradient NaN),
    although ``logsigmoid(-1e3) = -1e3`` is perfectly representable. The checks
    use ``beta * margin`` as large as ``±1e3``. The rewards are for logging: they
    are detached (no gradient flows through them).

    Raises ``ValueError`` (graded) if the four shapes differ.

    TODO (dpo_loss), in words:
      1. Check that the four shapes are equal, else raise ``ValueError``.
      2. Compute the two log-ratios, policy minus reference, chosen and rejected.
      3. The loss is the batch mean of ``-F.logsigmoid(beta * (chosen - rejected))``.
      4. The rewards are ``beta`` times each log-ratio, detached.
    """
    raise NotImplementedError("dpo_loss: write dpo_loss")


def group_advantages(rewards: Tensor, group_size: int, eps: float = 1e-4) -> Tensor:
    """GRPO's advantages: each reward compared with the other answers to the same prompt.

    ``rewards (G * group_size,)`` holds ``group_size`` answers per prompt, the
    groups one after another: prompt ``g``'s answers are
    ``rewards[g * group_size : (g + 1) * group_size]``. GRPO needs no value
    model: an answer's advantage is its reward standardised within its group::

        A = (r - mean(group)) / (std(group) + eps)     # std unbiased: torch.std's default

    The result has the shape of ``rewards``. A group of equal rewards teaches
    nothing and gives zeros (its std is 0, hence the ``eps`` outside the std).

    Raises ``ValueError`` (graded) if ``group_size < 2`` or the number of
    rewards is not a multiple of it.

    TODO (grpo_loss), in words:
      1. Check ``group_size`` and raise ``ValueError`` as described above.
      2. View the rewards as ``(G, group_size)``.
      3. Subtract each group's mean and divide by its std plus ``eps``
         (``keepdim=True`` so that they broadcast over the group).
      4. Flatten back to the shape of ``rewards``.
    """
    raise NotImplementedError("grpo_loss: write group_advantages")


def grpo_loss(logps: Tensor, old_logps: Tensor, ref_logps: Tensor, advantages: Tensor, mask: Tensor,
              clip_eps: float = 0.2, beta: float = 0.04) -> Tensor:
    """GRPO's loss, a 0-dim tensor: DeepSeekMath's objective, negated, as TRL's ``GRPOTrainer``.

    ``logps``, ``old_logps``, ``ref_logps (B, T)``: each answer token's
    log-probability under the policy being trained, the policy that sampled the
    answers, and the frozen reference; ``advantages (B,)`` (one per answer,
    ``group_advantages``); ``mask (B, T)`` bool, True at the answer's tokens.
    Per token, with ``A`` its sequence's advantage::

        ratio     = exp(logps - old_logps)
        surrogate = min(ratio * A, clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A)
        kl        = exp(ref_logps - logps) - (ref_logps - logps) - 1      # the "k3" estimator, >= 0
        loss_t    = -(surrogate - beta * kl)

    then each sequence's mean of ``loss_t`` over its tokens where ``mask`` is
    True, then the mean of those over the batch. The ``min`` is PPO's
    pessimism: clipping may only lower the objective, whatever the sign of
    ``A``. ``old_logps``, ``ref_logps`` and ``advantages`` are constants; only
    ``logps`` carries a gradient.

    TODO (grpo_loss), in words:
      1. Give each sequence's advantage a token axis: ``(B,)`` to ``(B, 1)``.
      2. Compute the ratio, the clipped surrogate (``torch.min`` of the two
         terms) and the k3 KL per token.
      3. ``loss_t = -(surrogate - beta * kl)``.
      4. Per sequence: the sum of ``loss_t`` where ``mask`` is True divided by
         the number of True in that row; then the mean over the batch.
    """
    raise NotImplementedError("grpo_loss: write grpo_loss")
