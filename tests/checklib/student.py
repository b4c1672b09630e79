"""Helpers for calling student code through the target and reading what it raised."""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

from grader.sandbox.protocol import StudentError

from grader.text import Phrase

from .catalogue import Known, Mistake, named
from .compare import Diagnosis, diagnosed, rediagnosed


def where(exc: StudentError) -> str:
    """The lines that say where student code raised `exc`, each on a line of its own after a message ("" if none)."""
    return "\n" + exc.where if exc.where else ""


def expect_value_error(call: Callable[..., Any], *args: Any, what: str,
                       lets_through: dict[Mistake, bool] | None = None, **kwargs: Any) -> str:
    """Call student code that must raise ValueError; returns its message. `lets_through`: the known mistakes
    of a check that lets some bad inputs through (an `and` for an `or`, say), each with whether this input
    is one it lets through: where no ValueError comes, those that let it through are matched and the others
    ruled out."""
    try:
        result = call(*args, **kwargs)
    except StudentError as exc:
        if type(exc) is not StudentError:  # not started, crashed, timed out...: that says it better
            raise
        if "ValueError" in exc.kinds:
            return exc.message
        got = f"{exc.type_name}: {exc.message}" if exc.message else exc.type_name  # (its translation quotes it)
        raise _let_through(AssertionError(Phrase("{what}: expected a ValueError, got {got}", what=what, got=got) + where(exc)),
                           lets_through) from None
    shown = getattr(result, "type_name", None) or getattr(result, "shape", result)
    shown = Phrase("'{text}'", text=shown) if isinstance(shown, Phrase) else repr(shown)  # (a text: its own words)
    raise _let_through(AssertionError(Phrase("{what}: expected a ValueError, but it returned {shown}", what=what,
                                             shown=shown)), lets_through)


def _let_through(failure: AssertionError, lets_through: dict[Mistake, bool] | None) -> AssertionError:
    """`failure` (no ValueError came), weighing the mistakes that let this input through (see expect_value_error)."""
    if not lets_through:
        return failure
    return rediagnosed(failure, Diagnosis([named(entry) for entry, through in lets_through.items() if through],
                                          [named(entry) for entry, through in lets_through.items() if not through]))


@contextmanager
def naming_errors(what: str, mistake: Known | Callable[[StudentError], Known | None],
                  when: Callable[[StudentError], bool] = lambda exc: True,
                  ruling_out: tuple[Mistake, ...] = ()) -> Iterator[None]:
    """Inside it, an error student code raised (not a hang, crash or 'not started') for which `when(error)`
    holds fails the check as `what`, named as `mistake` (or as what `mistake(error)` names: None names
    nothing), and rules out the mistakes `ruling_out` (code with one of them would not raise so); any other
    error passes on as it was."""
    try:
        yield
    except StudentError as exc:
        if type(exc) is StudentError and when(exc):
            known = mistake(exc) if callable(mistake) else mistake
            if known is not None:
                raise diagnosed(Phrase("{what}: {problem}", what=what, problem=exc.describe()), known, ruling_out) from None
        raise
