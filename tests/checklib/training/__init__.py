"""The training tasks of the checks that train a model, one module per component (course content, beside the
checks that use them): tiny_lm.py (the capstone's, which `python -m grader train` runs too) and
vit_classifier.py (the vision track's). Here, the loop they share.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor


class TrainingFailed(Exception):
    """The model returned something the training cannot use (the wrong shape, non-finite logits, no gradient)."""


def remote_training(model: Any, called: str, state: dict[str, Tensor], batch_at: Callable[[int], tuple[Tensor, Tensor]],
                    shape: tuple[int, ...], loss_of: Callable[[Tensor, Tensor], Tensor], *, steps: int, lr: float,
                    weight_decay: float, lr_at: Callable[[int], float] | None = None,
                    on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train a RemoteObject `model` from the weights `state` with torch.optim.AdamW; the losses, one per step.

    The weights are the grader's: each step sends them to the model, reads its logits (they must have
    `shape`), and has it backpropagate the loss's gradient into its parameters. `called` names the call in
    messages ("TinyLM(idx"); `lr_at(step)`, when given, sets each step's learning rate.
    """
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    optimizer = torch.optim.AdamW(params.values(), lr=lr, weight_decay=weight_decay, foreach=True)
    losses = []
    for step in range(steps):
        if lr_at is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
        inputs, targets = batch_at(step)
        model.load_weights({k: v.detach() for k, v in params.items()})
        logits = model.forward_kept(inputs)
        if not isinstance(logits, Tensor) or tuple(logits.shape) != shape or not logits.is_floating_point():
            got = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
            call = f"{called} {tuple(inputs.shape)})"  # whole, so that a translation reads it as one call
            raise TrainingFailed(f"step {step}: {call} returned {got}, expected logits {shape}")
        logits = logits.float().requires_grad_(True)
        loss = loss_of(logits, targets)
        if not torch.isfinite(loss):
            raise TrainingFailed(f"step {step}: the loss is {loss.item()}")
        (grad_logits,) = torch.autograd.grad(loss, logits)
        grads = model.backward(grad_logits)["params"]
        for name, p in params.items():
            g = grads.get(name)
            if g is None:
                raise TrainingFailed(f"step {step}: no gradient reached {name}")
            p.grad = g.to(p.dtype)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
    model.load_weights({k: v.detach() for k, v in params.items()})
    return losses
