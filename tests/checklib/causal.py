"""Causal-leakage probes shared by the checks: change the future, look at the past.

Everything here talks to student code through callables the check passes in
(`impl.fn(...)`, a `RemoteObject`, or a grad function), so it works the same
for functions, modules and stacks of modules.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from .compare import assert_close


def causal_bool_mask(q_len: int, k_len: int | None = None) -> Tensor:
    """Bool (q_len, k_len), True where query i may attend key j (queries are the last q_len keys)."""
    k_len = q_len if k_len is None else k_len
    return torch.ones(q_len, k_len, dtype=torch.bool).tril(diagonal=k_len - q_len)


def with_future_changed(x: Tensor, position: int, gen: torch.Generator, dim: int = -2) -> Tensor:
    """A copy of `x` whose positions `position`, `position + 1`, ... along `dim` are redrawn."""
    changed = x.clone()
    index = [slice(None)] * x.dim()
    index[dim] = slice(position, None)
    future = changed[tuple(index)]
    fresh = torch.randn(future.shape, generator=gen, dtype=torch.float64).to(x.dtype) * 3.0
    changed[tuple(index)] = fresh
    return changed


def assert_past_unchanged(before: Tensor, after: Tensor, position: int, *, what: str, hint: str, dim: int = -2) -> None:
    """Outputs at positions < `position` along `dim` must be the same in both results."""
    index = [slice(None)] * before.dim()
    index[dim] = slice(0, position)
    assert_close(after[tuple(index)], before[tuple(index)], what=what, hint=hint)


def one_hot_grad_output(shape: Sequence[int], position: int, gen: torch.Generator, dtype=torch.float32, dim: int = -2) -> Tensor:
    """A random grad_output that is zero everywhere except at `position` along `dim`."""
    g = torch.zeros(*shape, dtype=dtype)
    index = [slice(None)] * len(shape)
    index[dim] = position
    g[tuple(index)] = torch.randn(g[tuple(index)].shape, generator=gen, dtype=torch.float64).to(dtype)
    return g


def assert_no_gradient_from_future(grad: Tensor, position: int, *, what: str, hint: str, dim: int = -2) -> None:
    """The gradient of output `position` w.r.t. inputs at positions > `position` must be zero."""
    index = [slice(None)] * grad.dim()
    index[dim] = slice(position + 1, None)
    future = grad[tuple(index)]
    assert_close(future, torch.zeros_like(future), what=what, hint=hint)


def vjp_chain(grads: Sequence[Callable[[Tensor, Tensor], Tensor]], inputs: Sequence[Tensor], grad_output: Tensor) -> Tensor:
    """Backpropagate through a stack of remote calls: `grads[i](inputs[i], g)` is the VJP of layer i."""
    g = grad_output
    for grad, x in zip(reversed(grads), reversed(inputs)):
        g = grad(x, g)
    return g
