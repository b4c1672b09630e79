"""A grader tool: parameters that live beside the implementation, so an optimizer there can update them.

A check sends plain tensors: the starting values, then each step's gradients
(`set_grads`); the student's `AdamW` or `clip_grad_norm` gets this object (or
`generator()`) as its `parameters`, and the check reads the values and gradients
back as plain tensors. It holds no answer: it only stores tensors and calls what
it is given.
"""
from __future__ import annotations

from typing import Iterator

import torch
from torch import Tensor


class Parameters:
    def __init__(self, values: list[Tensor]) -> None:
        self.params = [torch.nn.Parameter(v.detach().clone()) for v in values]

    def __iter__(self) -> Iterator[torch.nn.Parameter]:
        return iter(self.params)

    def generator(self):
        """A one-shot generator over the parameters, like `model.parameters()`."""
        return (p for p in self.params)

    def group(self, *indices: int):
        """A one-shot generator over some of the parameters (for a param group)."""
        return (self.params[i] for i in indices)

    def set_grads(self, grads: list[Tensor | None]) -> None:
        for p, g in zip(self.params, grads, strict=True):
            p.grad = None if g is None else g.detach().clone().to(p.dtype)

    def values(self) -> list[Tensor]:
        return [p.detach().clone() for p in self.params]

    def grads(self) -> list[Tensor | None]:
        return [None if p.grad is None else p.grad.detach().clone() for p in self.params]

    def set_group(self, optimizer, index: int, settings: dict) -> None:
        """What a schedule does between steps: optimizer.param_groups[index].update(settings)."""
        optimizer.param_groups[index].update(settings)

    def step(self, optimizer, grads: list[Tensor | None] | None = None, loss: float | None = None):
        """optimizer.step(); with `loss`, through a closure that sets `grads` and returns tensor(loss).

        Returns (what step returned, how many times the closure ran).
        """
        if loss is None:
            if grads is not None:
                self.set_grads(grads)
            return optimizer.step(), 0
        calls = []

        def closure() -> Tensor:
            calls.append(1)
            self.set_grads(grads)
            return torch.tensor(loss)

        return optimizer.step(closure), len(calls)
