"""Comparisons whose failure messages say what was expected, what came back, and where.

The tolerance is defined once, in `tolerance.py` (`RTOL`, `ATOL`): the contract's, which float32 arithmetic meets,
for float64 inputs too (a float64 result computed partly in float32 is correct), scaled by the
magnitude of the expected values. What float64 would catch beyond it is caught another way: a
float64 input that comes back float32 by the dtype check, a low-precision algorithm by inputs where
float32 arithmetic done right passes and the wrong algorithm fails by far more.

Every comparison takes `mistakes`: a mapping from a known mistake (a
catalogue entry, `catalogue.Mistake`, or one named with the values of its
sentence's fields, `entry.text(...)`) to what that mistake would have produced
on the same inputs (see `mistakes/`). A value may be a tensor, a `torch.Size`
(the mistake is known by its shape only), a plain value (int, float, set, ...)
compared with ==, or a zero-arg callable returning one of these, so that
nothing is computed unless the check fails. When a check fails, every mistake
is weighed (`diagnose`): it matched (what came back is its output, which is not
the expected one) or it is ruled out (its output differs from both). The
failure (a `CheckFailure`) carries both lists by id and fields, which the
grader weighs over all of the check's cases and words in the reader's language
(a line `  diagnosis: <sentence>` before the hint); its English text, what
plain pytest prints, has that line too.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple

import torch
from torch import Tensor

from grader.check_text import diagnosis_line
from grader.i18n import DEFAULT as ENGLISH
from grader.results import CheckFailure, with_diagnosis

from .catalogue import Mistake, Named, named
from .mistakes.general import dtype_changed, squeezed
from .tolerance import ATOL, FLOAT64_ATOL, FLOAT64_RTOL, RTOL, differing, matches
from grader.text import Phrase

# known mistake (a catalogue entry, or one named with its fields) -> what it gives (or a zero-arg callable computing it)
Mistakes = Mapping["Mistake | Named", Any]


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def shown(value: Any) -> str:
    """A value as a failure message shows it: a tensor by its dtype and shape, never all its numbers."""
    if isinstance(value, Tensor):
        return Phrase("a {dtype} tensor of shape {shape}", dtype=_dtype_name(value.dtype),
                      shape=_fmt_shape(value.shape))
    if isinstance(value, (tuple, list)):
        items = Phrase.joined(", ", [shown(v) for v in value[:4]] + (["..."] if len(value) > 4 else []))
        return Phrase("a {kind} of {length} ({items})", kind=type(value).__name__, length=len(value), items=items)
    return repr(value)


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _values(expected: Any, got: Any) -> str:
    """'expected X, got Y' with as many significant digits as it takes for X and Y to read differently."""
    if isinstance(expected, float) and isinstance(got, float):
        for digits in range(6, 18):
            shown = f"{expected:.{digits}g}", f"{got:.{digits}g}"
            if shown[0] != shown[1]:
                return Phrase("expected {expected}, got {got}", expected=shown[0], got=shown[1])
    return Phrase('expected {expected}, got {got}', expected=repr(expected), got=repr(got))


def _fail(what: str, problem: str, hint: str, diagnosis: "Diagnosis | None" = None) -> None:
    """Raise the failure "<what>: <problem>" (then "  hint: <hint>"), each a Phrase or a plain string."""
    message = Phrase("{what}: {problem}\n  hint: {hint}", what=what, problem=problem, hint=hint) if hint else \
        Phrase("{what}: {problem}", what=what, problem=problem)
    raise failure(message, diagnosis)


def failure(message: str, diagnosis: "Diagnosis | None" = None) -> CheckFailure:
    """The failure `message` (its first line, then any `  hint:` line) with what `diagnosis` says of the known
    mistakes, by id; its English text (plain pytest's) carries the diagnosis line before the hint."""
    matched, ruled_out = diagnosis or ([], [])
    matched = [n.data() for n in matched]
    return CheckFailure(message, matched, [n.data() for n in ruled_out],
                        with_diagnosis(message, diagnosis_line(matched, ENGLISH)))


def diagnosed(message: str, mistake: "Mistake | Named", ruled_out: "tuple[Mistake, ...]" = ()) -> CheckFailure:
    """The failure `message` explained by one known mistake that a check recognised by itself (an error
    that student code raised, say): the mistake matched (and `ruled_out`, the mistakes whose code would not
    have failed so, ruled out)."""
    return failure(message, Diagnosis([named(mistake)], [named(m) for m in ruled_out]))


def explained(failure: CheckFailure, mistake: "Mistake | Named") -> CheckFailure:
    """`failure` explained by a known mistake that the check recognised after it, by a second look at the
    code's behaviour: its diagnosis replaced by the mistake's."""
    return rediagnosed(failure, Diagnosis([named(mistake)], []))


def rediagnosed(failed: AssertionError, diagnosis: "Diagnosis") -> CheckFailure:
    """`failed` with the diagnosis that a wider look gave (say over a whole run of steps, where one step's
    output cannot tell two mistakes apart) instead of its own."""
    return failure(failed.message if isinstance(failed, CheckFailure) else message_of(failed), diagnosis)


def message_of(failed: BaseException) -> str:
    """An AssertionError's message as it was raised (a Phrase keeps its parts)."""
    return failed.args[0] if len(failed.args) == 1 and isinstance(failed.args[0], str) else str(failed)


class Diagnosis(NamedTuple):
    """What one failing case says of the known mistakes."""

    matched: list[Named]  # what came back is this mistake's output (and not the expected one)
    ruled_out: list[Named]  # this mistake's output is neither what came back nor the expected one


def diagnose(actual: Any, mistakes: Mistakes | None, *, expected: Any = None, rtol: float | None = None,
             atol: float | None = None, dtype_failed: bool = False, dtype: torch.dtype | None = None) -> Diagnosis:
    """Weigh every mistake against what came back (`actual`) on one failing case.

    A mistake whose model cannot be computed for these inputs (it raises, or gives None)
    says nothing: a diagnosis only ever adds a line to a failure, it never causes or hides
    one. A mistake is ruled out only where the expected result is known: where its output
    is neither what came back nor the expected one, and where it is the expected one (the
    case failed, so the code does something else). Where the check failed on the dtype
    (`dtype_failed`), a mistake is not ruled out for giving the expected values, and a
    model of another dtype than `actual`'s does not match on values alone (nor is it ruled
    out by them). Given the `dtype` the check asks for, the shared dtype mistake (mistakes.general.dtype_changed)
    is weighed too: matched where only the dtype is wrong (and no mistake of the check's own matched),
    ruled out where the values are. Where several mistakes match a float64 result and it equals some of them at
    float64's precision (it was computed in float64), the others are ruled out.
    """
    matched: list[Named] = []
    ruled_out: list[Named] = []
    models: dict[Named, Any] = {}  # what each matched mistake gave
    for key, model in (mistakes or {}).items():
        known = named(key)
        try:
            candidate = model() if callable(model) else model
            if candidate is None:
                continue
            # a model of the right values in another dtype than expected is a dtype mistake, weighed below
            dtype_model = dtype_failed and isinstance(candidate, Tensor) and isinstance(expected, Tensor) and \
                candidate.dtype != expected.dtype
            if expected is not None and not dtype_model and matches(expected, candidate, rtol, atol):
                if not dtype_failed and not matches(actual, candidate, rtol, atol):
                    ruled_out.append(known)  # this mistake would have passed this case
                continue
            same = matches(actual, candidate, rtol, atol)
        except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
            continue
        if same and dtype_failed and isinstance(candidate, Tensor) and candidate.dtype != actual.dtype:
            continue
        if same:
            matched.append(known)
            models[known] = candidate
        elif expected is not None:
            ruled_out.append(known)
    if len(matched) > 1 and isinstance(actual, Tensor) and actual.dtype == torch.float64:
        # several mistakes within float32's reach of a float64 result: where it equals some of them at float64's
        # precision (it was computed in float64), the others are ruled out
        exact = [s for s in matched if matches(actual, models[s], FLOAT64_RTOL, FLOAT64_ATOL)]
        if exact:
            ruled_out += [s for s in matched if s not in exact]
            matched = exact
    if dtype is not None and isinstance(actual, Tensor):
        entry = dtype_changed(dtype, actual.dtype if dtype_failed else None)
        if entry is not None and dtype_failed and (not isinstance(expected, Tensor) or matches(
                actual, expected.to(actual.dtype), rtol, atol)):
            if not matched:  # a check's own mistake of that dtype (an additive float mask, say) says more
                matched.append(named(entry))
        elif entry is not None and isinstance(expected, Tensor) and actual.shape == expected.shape:
            ruled_out.append(named(entry))
    return Diagnosis(matched, ruled_out)


def fail(what: str, problem: str, *, hint: str = "", actual: Any = None, expected: Any = None,
         mistakes: Mistakes | None = None) -> None:
    """Raise the standard failure message, with a diagnosis line when `actual` matches a mistake."""
    _fail(what, problem, hint, diagnose(actual, mistakes, expected=expected))


def check_tensor(actual, *, what: str, shape=None, dtype: torch.dtype | None = None, device=None, hint: str = "",
                 mistakes: Mistakes | None = None) -> Tensor:
    """Fail unless `actual` is a plain tensor of the given shape, dtype and device."""
    problem = _tensor_problem(actual, shape, dtype, device)
    if problem is not None:
        expected = torch.Size(shape) if shape is not None and None not in tuple(shape) else None
        diagnosis = diagnose(actual, mistakes, expected=expected, dtype=dtype,
                             dtype_failed=_dtype_failed(actual, shape, dtype))
        weighed = squeezed(actual, shape)  # the expected shape without its axes of size 1 (ruled out by another)
        if weighed is not None and weighed[1] and not diagnosis.matched:
            diagnosis = Diagnosis([named(weighed[0])], diagnosis.ruled_out)
        elif weighed is not None and not weighed[1]:
            diagnosis = Diagnosis(diagnosis.matched, [*diagnosis.ruled_out, named(weighed[0])])
        _fail(what, problem, hint, diagnosis)
    return actual


def _tensor_problem(actual, shape, dtype, device) -> str | None:
    if not isinstance(actual, Tensor):
        return Phrase("expected a torch.Tensor, got {kind}", kind=type(actual).__name__)
    if shape is not None and tuple(actual.shape) != tuple(shape):
        return Phrase("expected shape {expected}, got {got}", expected=_fmt_shape(shape),
                      got=_fmt_shape(actual.shape))
    if dtype is not None and actual.dtype != dtype:
        return Phrase("expected dtype {expected}, got {got}", expected=dtype, got=actual.dtype)
    if device is not None and actual.device != torch.device(device):
        return Phrase("expected a tensor on device {expected}, got one on {got}", expected=torch.device(device),
                      got=actual.device)
    return None


def _dtype_failed(actual: Any, shape, dtype: torch.dtype | None) -> bool:
    """Whether a check of (shape, dtype) fails `actual` on its dtype (its shape being right)."""
    return (isinstance(actual, Tensor) and dtype is not None and actual.dtype != dtype
            and (shape is None or tuple(actual.shape) == tuple(shape)))


def assert_close(
    actual,
    expected: Tensor,
    *,
    what: str,
    hint: str = "",
    rtol: float | None = None,
    atol: float | None = None,
    check_dtype: bool = True,
    mistakes: Mistakes | None = None,
) -> None:
    """Fail with the first differing position and the size of the error (and a diagnosis, see `mistakes`)."""
    rtol = RTOL if rtol is None else rtol
    atol = ATOL if atol is None else atol
    problem = _tensor_problem(actual, expected.shape, expected.dtype if check_dtype else None, None)
    if problem is not None:
        _fail(what, problem, hint, diagnose(actual, mistakes, expected=expected, rtol=rtol, atol=atol,
                                            dtype=expected.dtype if check_dtype else None,
                                            dtype_failed=check_dtype and _dtype_failed(actual, expected.shape,
                                                                                       expected.dtype)))
    reference = expected.to(torch.float64)
    got = actual.to(torch.float64)
    if reference.numel() and torch.allclose(got, reference, rtol=rtol, atol=atol * max(1.0, reference.abs().max().item()),
                                            equal_nan=True):
        return  # what differing finds nothing in (NaN where NaN, infinities equal), in one call on the passing path
    bad_values, scale = differing(got, reference, rtol, atol)
    if not bad_values.any():
        return
    index = tuple(int(i) for i in bad_values.nonzero()[0])
    error = (got - reference).abs()
    error = error[torch.isfinite(error)]
    max_error = f"{error.max().item():.3g}" if error.numel() else "inf/nan"
    _fail(
        what,
        Phrase("{count} of {total} {dtype} values differ (largest error {error}, allowed {atol} + "
               "{rtol}·|expected|); first at index {index}: ", count=int(bad_values.sum()), total=bad_values.numel(),
               dtype=_dtype_name(expected.dtype), error=max_error, atol=format(atol * scale, '.1g'),
               rtol=format(rtol, '.0e'), index=list(index))
        + _values(reference[index].item(), got[index].item()),
        hint,
        diagnose(actual, mistakes, expected=expected, rtol=rtol, atol=atol,
                 dtype=expected.dtype if check_dtype else None),
    )


def assert_equal(actual, expected: Tensor, *, what: str, hint: str = "", mistakes: Mistakes | None = None) -> None:
    """Bit-identical values (NaN equal to NaN), same shape and dtype (and a diagnosis, see `mistakes`)."""
    problem = _tensor_problem(actual, expected.shape, expected.dtype, None)
    if problem is not None:
        _fail(what, problem, hint, diagnose(actual, mistakes, expected=expected, dtype=expected.dtype,
                                            dtype_failed=_dtype_failed(actual, expected.shape, expected.dtype)))
    same = (actual == expected) | (torch.isnan(actual) & torch.isnan(expected)) if actual.is_floating_point() else actual == expected
    if bool(same.all()):
        return
    index = tuple(int(i) for i in (~same).nonzero()[0])
    _fail(
        what,
        Phrase("{count} of {total} {dtype} values differ; first at index {index}: ", count=int((~same).sum()),
               total=same.numel(), dtype=_dtype_name(expected.dtype), index=list(index)) + _values(expected[index].item(), actual[index].item()),
        hint,
        diagnose(actual, mistakes, expected=expected, dtype=expected.dtype),
    )


def assert_not_close(actual: Tensor, other: Tensor, *, what: str, hint: str = "") -> None:
    """Fail when two tensors are (nearly) equal although they should differ."""
    check_tensor(actual, what=what, shape=other.shape, hint=hint)
    if torch.allclose(actual.to(torch.float64), other.to(torch.float64), rtol=RTOL * 10, atol=ATOL * 10):
        _fail(what, "expected the two results to differ, but they are equal", hint)
