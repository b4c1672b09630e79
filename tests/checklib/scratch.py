"""The "from scratch" check: the component's own code, not a library call that skips the exercise."""
from __future__ import annotations

from checklib.compare import fail
from grader.course import load_course
from grader.engine.scratch import forbidden_uses, not_started
from grader.sandbox.protocol import NotStarted
from grader.text import Phrase


def assert_from_scratch(folder: str, component: str) -> None:
    """Fail when the component's code calls a library function that course.yml forbids for it.

    Reads the source only. An untouched stub reads as "not started": there is no
    code yet that could be from scratch.
    """
    untouched = not_started(folder, component)
    if untouched:
        raise NotStarted("NotImplementedError", Phrase("{names} still raise NotImplementedError",
                                                       names=", ".join(untouched)))
    forbidden = list(load_course().component(component).forbidden)
    uses = forbidden_uses(folder, component, forbidden)
    if uses:
        listed = Phrase.joined("\n", [use.phrase() for use in uses])
        fail(Phrase("{component} must be written from scratch", component=component),
             Phrase("your code calls a library function that does the exercise for you:\n{listed}", listed=listed),
             hint="replace each of these calls with your own tensor operations")
