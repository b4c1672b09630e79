"""Comparisons whose failure messages say what was expected, what came back, and where.

Tolerances are defined here once: relative to the dtype, and scaled by the
magnitude of the expected values.
"""
from __future__ import annotations

import torch
from torch import Tensor

# (rtol, atol) per dtype; atol is scaled by max(1, |expected|.max()).
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-9, 1e-10),
}


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    return TOLERANCES.get(dtype, TOLERANCES[torch.float32])


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _fail(what: str, problem: str, hint: str) -> None:
    message = f"{what}: {problem}"
    if hint:
        message += f"\n  hint: {hint}"
    raise AssertionError(message)


def check_tensor(actual, *, what: str, shape=None, dtype: torch.dtype | None = None, device=None, hint: str = "") -> Tensor:
    """Fail unless `actual` is a plain tensor of the given shape, dtype and device."""
    if not isinstance(actual, Tensor):
        _fail(what, f"expected a torch.Tensor, got {type(actual).__name__}", hint)
    if shape is not None and tuple(actual.shape) != tuple(shape):
        _fail(what, f"expected shape {_fmt_shape(shape)}, got {_fmt_shape(actual.shape)}", hint)
    if dtype is not None and actual.dtype != dtype:
        _fail(what, f"expected dtype {dtype}, got {actual.dtype}", hint)
    if device is not None and actual.device != torch.device(device):
        _fail(what, f"expected a tensor on device {torch.device(device)}, got one on {actual.device}", hint)
    return actual


def assert_close(
    actual,
    expected: Tensor,
    *,
    what: str,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
    check_dtype: bool = True,
) -> None:
    """Fail with the first differing position and the size of the error."""
    check_tensor(actual, what=what, shape=expected.shape, dtype=expected.dtype if check_dtype else None, hint=hint)
    default_rtol, default_atol = tolerance(expected.dtype)
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    reference = expected.to(torch.float64)
    got = actual.to(torch.float64)
    scale = max(1.0, reference.abs().max().item()) if reference.numel() else 1.0
    allowed = atol * scale + rtol * reference.abs()
    bad_values = torch.isnan(got) != torch.isnan(reference)
    both_finite = torch.isfinite(got) & torch.isfinite(reference)
    bad_values |= both_finite & ((got - reference).abs() > allowed)
    bad_values |= ~both_finite & ~torch.isnan(reference) & (got != reference)
    if not bad_values.any():
        return
    index = tuple(int(i) for i in bad_values.nonzero()[0])
    error = (got - reference).abs()
    error = error[torch.isfinite(error)]
    max_error = f"{error.max().item():.3g}" if error.numel() else "inf/nan"
    _fail(
        what,
        f"{int(bad_values.sum())} of {bad_values.numel()} values differ (largest error {max_error}, "
        f"allowed {atol * scale:.1g} + {rtol:.0e}·|expected|); first at index {list(index)}: "
        f"expected {reference[index].item():.6g}, got {got[index].item():.6g}",
        hint,
    )


def assert_equal(actual, expected: Tensor, *, what: str, hint: str = "") -> None:
    """Bit-identical values (NaN equal to NaN), same shape and dtype."""
    check_tensor(actual, what=what, shape=expected.shape, dtype=expected.dtype, hint=hint)
    same = (actual == expected) | (torch.isnan(actual) & torch.isnan(expected)) if actual.is_floating_point() else actual == expected
    if bool(same.all()):
        return
    index = tuple(int(i) for i in (~same).nonzero()[0])
    _fail(
        what,
        f"{int((~same).sum())} of {same.numel()} values differ; first at index {list(index)}: "
        f"expected {expected[index].item()!r}, got {actual[index].item()!r}",
        hint,
    )


def assert_not_close(actual: Tensor, other: Tensor, *, what: str, hint: str = "") -> None:
    """Fail when two tensors are (nearly) equal although they should differ."""
    check_tensor(actual, what=what, shape=other.shape, hint=hint)
    rtol, atol = tolerance(other.dtype)
    if torch.allclose(actual.to(torch.float64), other.to(torch.float64), rtol=rtol * 10, atol=atol * 10):
        _fail(what, "expected the two results to differ, but they are equal", hint)
