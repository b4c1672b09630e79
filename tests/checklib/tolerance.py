"""When two values are the same: the contract's tolerance, and whether a known mistake's output matches what
came back (`matches`, as `compare.diagnose` and the combinators of `mistakes/general.py` weigh it).

The tolerance is defined here once (`RTOL`, `ATOL`), for every graded dtype; `compare.py`'s docstring says
what it leaves to other checks.
"""
from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

# The contract's tolerance for every graded dtype; ATOL is scaled by max(1, |expected|.max()).
RTOL, ATOL = 1e-4, 1e-5
# float64's own precision: never to fail a check, only to tell apart the known mistakes that a float64 result
# computed in float64 matches within the contract's tolerance (see `compare.diagnose`).
FLOAT64_RTOL, FLOAT64_ATOL = 1e-9, 1e-10


def differing(got: Tensor, reference: Tensor, rtol: float, atol: float, *, finite_scale: bool = False
              ) -> tuple[Tensor, float]:
    """Where `got` is not close to `reference` (both float64), and the atol scale used."""
    if finite_scale:  # scale by the finite values only: an -inf in `reference` must not allow everything
        reference_finite = reference[torch.isfinite(reference)]
        scale = max(1.0, reference_finite.abs().max().item()) if reference_finite.numel() else 1.0
    else:
        scale = max(1.0, reference.abs().max().item()) if reference.numel() else 1.0
    allowed = atol * scale + rtol * reference.abs()
    bad = torch.isnan(got) != torch.isnan(reference)
    both_finite = torch.isfinite(got) & torch.isfinite(reference)
    bad |= both_finite & ((got - reference).abs() > allowed)
    bad |= ~both_finite & ~torch.isnan(reference) & (got != reference)
    return bad, scale


class Approximate:
    """A mistake's output known only to within `error` per entry (float32's rounding of a large angle, say,
    that a model in float64 cannot reproduce); indexing selects from both."""

    def __init__(self, values: Tensor, error: Tensor) -> None:
        self.values, self.error = values, error.expand_as(values)

    def __getitem__(self, index: Any) -> "Approximate":
        return Approximate(self.values[index], self.error[index])

    @property
    def shape(self) -> torch.Size:
        return self.values.shape


def matches(actual: Any, candidate: Any, rtol: float | None, atol: float | None) -> bool:
    """Whether what came back (`actual`) is a mistake's output (`candidate`: a tensor, an `Approximate`, a
    `torch.Size`, or a plain value compared with ==) within `rtol` and `atol` (None: the contract's)."""
    if candidate is None:
        return False
    if isinstance(candidate, Approximate):
        if not isinstance(actual, Tensor) or actual.shape != candidate.shape or not candidate.values.isfinite().all():
            return False
        allowed = candidate.error + (ATOL if atol is None else atol)
        return bool(((actual.detach().to(torch.float64) - candidate.values).abs() <= allowed).all())
    if isinstance(candidate, torch.Size):
        shape = actual if isinstance(actual, torch.Size) else actual.shape if isinstance(actual, Tensor) else None
        return shape == candidate
    if isinstance(candidate, Tensor):
        if not isinstance(actual, Tensor) or actual.shape != candidate.shape or actual.device != candidate.device:
            return False
        if actual.numel() == 0:
            return True
        if not (actual.is_floating_point() or candidate.is_floating_point()):
            return bool((actual == candidate).all())
        bad, _ = differing(actual.detach().to(torch.float64), candidate.detach().to(torch.float64),
                           RTOL if rtol is None else rtol, ATOL if atol is None else atol, finite_scale=True)
        return not bool(bad.any())
    if isinstance(actual, Tensor) or type(actual) is not type(candidate):
        return False
    return bool(actual == candidate)
