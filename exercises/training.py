"""Training a language model: the loss, the optimizer and the learning-rate schedule.

Three components live here:

- ``cross_entropy``: ``softmax``, ``log_softmax`` and ``cross_entropy``, the loss of
  next-token prediction;
- ``optimizer``: ``AdamW`` and ``clip_grad_norm``, what turns gradients into updates;
- ``lr_schedule``: ``lr_at``, linear warmup then cosine decay, the schedule of
  GPT-style training.

Each must equal PyTorch's own (``torch.softmax``, ``F.cross_entropy``,
``torch.optim.AdamW``, ``torch.nn.utils.clip_grad_norm_``), and must be written from
tensor operations: the checks reject calls of those built-ins (``torch.exp``,
``torch.log``, ``torch.sqrt``, ``amax``, ``gather`` and ``torch._foreach_*`` are fine).
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import torch
from torch import Tensor


def log_softmax(x: Tensor, dim: int = -1) -> Tensor:
    """``log(softmax(x))`` along ``dim``: same shape and dtype as ``x``.

    Why subtract the maximum? ``exp`` overflows quickly: ``exp(89)`` is already
    ``inf`` in float32, and scores of a few hundred are common in a badly
    initialised model. Softmax does not change when the same constant is
    subtracted from every score of a row (it cancels between numerator and
    denominator), so subtract each row's maximum first: the largest exponent
    is then ``exp(0) = 1`` and nothing overflows. The checks use scores as large
    as ``±1e4``.

    Why not ``log(softmax(x))``? Where a probability underflows to 0 its log is
    ``-inf``, although the true value (say ``-2e4``) is perfectly representable.
    Work in log space: ``log_softmax(x) = (x - m) - log(sum(exp(x - m)))`` with
    ``m`` the row's maximum (the "log-sum-exp trick").

    TODO (cross_entropy), in words:
      1. Take the maximum of ``x`` along ``dim``, keeping the dimension
         (``keepdim=True``) so that it broadcasts back against ``x``.
      2. Subtract it; every entry is now <= 0.
      3. Subtract the log of the sum of the exponentials of that, along ``dim``
         (keepdim again).
    """
    raise NotImplementedError("cross_entropy: write log_softmax")


def softmax(x: Tensor, dim: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim``: same shape and dtype, each slice sums to 1.

    Equal to ``torch.softmax(x, dim)`` and finite wherever it is, for scores up to
    ``±1e4`` (see ``log_softmax`` for why the maximum is subtracted first). You
    may compute it directly or as ``exp(log_softmax(x, dim))``.

    TODO (cross_entropy), in words:
      1. Subtract the maximum along ``dim`` (keepdim) from ``x``.
      2. Exponentiate, then divide by the sum along ``dim`` (keepdim).
    """
    raise NotImplementedError("cross_entropy: write softmax")


def cross_entropy(logits: Tensor, targets: Tensor, *, ignore_index: int = -100) -> Tensor:
    """The mean of ``-log p[target]``: ``logits (..., V)``, ``targets (...)`` int64 -> 0-dim tensor.

    A language model gives ``logits (B, T, V)``, one score per vocabulary entry at
    each position; ``targets (B, T)`` holds the token that really came next. The
    loss is the average, over the positions, of minus the log-probability the
    model gave that token: 0 when it was certain and right, large when it was
    sure of something else.

    Positions whose target is ``ignore_index`` (padding, the prompt) count for
    nothing: they are left out of the sum *and* of the number the mean divides
    by. The result is a 0-dim tensor in the logits' dtype, equal to
    ``F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=ignore_index)``.

    Raises ``ValueError`` (graded) if ``targets.shape != logits.shape[:-1]``.

    TODO (cross_entropy), in words:
      1. Check the shapes and raise ``ValueError`` as described above.
      2. Flatten: logits to ``(N, V)``, targets to ``(N,)``.
      3. Take your ``log_softmax`` of the logits over the last dimension.
      4. Keep the rows whose target is not ``ignore_index``, and from each keep
         the entry at its target (``gather``, or index with ``arange``).
      5. Return minus their mean.
    """
    raise NotImplementedError("cross_entropy: write cross_entropy")


class AdamW(torch.optim.Optimizer):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019), equal step for step to ``torch.optim.AdamW``.

    Adam keeps, per parameter, running averages of the gradient (``m``, the
    first moment: a direction with momentum) and of its square (``v``, the
    second moment: how large the gradient usually is), and moves each entry by
    about ``lr`` in the direction of ``m``, scaled by ``1 / sqrt(v)``. Both
    averages start at 0, so early on they are too small; dividing by
    ``1 - beta**t`` (bias correction) undoes that, ``t`` being the number of
    updates of *this* parameter (a parameter without a gradient in a step is
    not updated and its ``t`` does not move).

    Why *decoupled* decay? Adding ``wd * p`` to the gradient (L2 regularisation)
    sends the decay through ``m`` and ``v``, and the ``1 / sqrt(v)`` scaling then
    shrinks it exactly for the parameters with large gradients. AdamW shrinks
    the parameter itself, ``p *= 1 - lr * wd``, before and apart from the Adam
    step, so every weight decays at the same rate.

    One step ``t`` (from 1) of a parameter ``p`` with gradient ``g``::

        p *= 1 - lr * weight_decay
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g**2
        p -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps)

    ``__init__(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)``:
    ``params`` is what ``torch.optim.Optimizer`` takes (an iterable of tensors, or
    of dicts, each a param group with its own settings). Raises ``ValueError``
    (graded) for a negative ``lr``, ``eps`` or ``weight_decay``, or a beta outside
    ``[0, 1)``.

    TODO (optimizer), ``__init__``, in words:
      1. Check the settings and raise ``ValueError`` as described above.
      2. Call ``super().__init__(params, defaults)`` with a dict of the four
         settings: the base class builds ``self.param_groups`` (each group a dict
         with its ``"params"`` and every setting) and ``self.state`` (a dict
         per parameter, empty at first).
    """

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01) -> None:
        raise NotImplementedError("optimizer: write AdamW.__init__")

    @torch.no_grad()
    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        """One update of every parameter that has a gradient; returns the closure's loss, or None.

        ``closure`` (optional) recomputes the loss and the gradients; call it first,
        under ``torch.enable_grad()`` (this method runs under ``no_grad``).

        TODO (optimizer), in words:
          1. If there is a closure, call it (with gradients enabled) and keep its loss.
          2. For each param group, read ``lr``, ``betas``, ``eps``, ``weight_decay``
             from the group *now*: a schedule may have changed them since the last step.
          3. For each of the group's parameters with a ``.grad`` (skip the others):
             get its state (``self.state[p]``); on its first update create
             its step count and ``m``, ``v`` (zeros like ``p``); count this step.
          4. Decay ``p`` in place, update ``m`` and ``v`` in place, then move ``p``
             in place as in the formula above.
          5. Return the loss (None without a closure).
        """
        raise NotImplementedError("optimizer: write AdamW.step")


def clip_grad_norm(parameters: Iterable[Tensor], max_norm: float) -> Tensor:
    """Scale all gradients together so that their norm is at most ``max_norm``; returns the norm before.

    Gradient clipping keeps one bad batch from throwing a model far away: the
    gradients of all the parameters are seen as one long vector; if its L2 norm
    exceeds ``max_norm``, every gradient is multiplied (in place) by
    ``max_norm / (norm + 1e-6)``, otherwise left as it is. The direction never
    changes, only the length. Equal to ``torch.nn.utils.clip_grad_norm_``.

    ``parameters`` may be any iterable, a generator too (``model.parameters()``
    is one): go through it once only. Parameters whose ``.grad`` is None are
    skipped. Returns the total norm before clipping, a 0-dim tensor.

    TODO (optimizer), in words:
      1. Collect the gradients that are not None into a list (one pass).
      2. The total norm: the square root of the sum of every squared entry of
         every gradient (the norm of the per-gradient norms is the same number).
      3. The factor ``min(1, max_norm / (norm + 1e-6))``.
      4. Multiply every gradient by it in place; return the norm.
    """
    raise NotImplementedError("optimizer: write clip_grad_norm")


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    """The learning rate at ``step``: linear warmup, cosine decay, then a floor (a Python float).

    Why warm up? At the start the weights are random, Adam's ``v`` has seen few
    gradients, and large steps can throw the model into a bad region it never
    leaves (or make the loss explode). So the rate rises linearly from 0 to
    ``max_lr`` over ``warmup_steps``; then it follows half a cosine down to
    ``min_lr``, decaying slowly at first and last, and stays there after
    ``total_steps``::

        step < warmup_steps:        max_lr * step / warmup_steps
        warmup_steps <= step <= total_steps:
            progress = (step - warmup_steps) / (total_steps - warmup_steps)   # 0 .. 1
            min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))
        step > total_steps:         min_lr

    Raises ``ValueError`` (graded) if ``step < 0``, ``warmup_steps < 0`` or
    ``total_steps <= warmup_steps``.

    TODO (lr_schedule), in words:
      1. Check the arguments and raise ``ValueError`` as described above.
      2. Return the value of the phase that ``step`` falls in (``math.cos``,
         ``math.pi``: the result is a plain float).
    """
    raise NotImplementedError("lr_schedule: write lr_at")
