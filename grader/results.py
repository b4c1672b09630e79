"""One result model under every report: check -> component -> total."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

from .i18n import N_

PASSED, FAILED, ERROR, TIMEOUT, NOT_STARTED = "passed", "failed", "error", "timeout", "not started"
MESSAGE_LIMIT = 2000  # characters of a failure's message that a report carries (the worker sends no more)


@dataclass
class CaseResult:
    """One run of a check (one parametrization)."""

    nodeid: str
    check: str
    component: str
    status: str
    message: str = ""  # in English, as plain pytest shows it
    # the known mistakes (tests/checklib/catalogue.py, as `Named` data: {"id", "fields"}) whose output this
    # case's failure matched, and those it ruled out: what the grader weighs over all of a check's cases (scoring.py)
    matched: list[dict] = field(default_factory=list)
    ruled_out: list[dict] = field(default_factory=list)
    # the message as data (grader/text.py: the English template of each of its texts, with their fields), which
    # the grader renders in the reader's language where it scores (grader/check_text.py render)
    text: str | dict = ""


class CheckFailure(AssertionError):
    """A check's failure: its message (its first line, then any hint line: a grader.text.Phrase, its texts as data)
    and the known mistakes (by id and fields) that what came back matched or ruled out on this case, which the
    grader weighs over all of a check's cases and words in the reader's language. Its own text (`english`: what
    plain pytest prints) has the diagnosis line too."""

    def __init__(self, message: str, matched: list[dict] | None = None, ruled_out: list[dict] | None = None,
                 english: str = "") -> None:
        super().__init__(english or message)
        self.message = message
        self.matched = list(matched or [])
        self.ruled_out = list(ruled_out or [])


DIAGNOSIS = "  diagnosis: "
HINT = "  hint: "
AMBIGUOUS = N_("this matches more than one known mistake, and these inputs cannot tell them apart: ")


def with_diagnosis(message: str, line: str, shown: str | None = None) -> str:
    """`shown` (`message` as its reader sees it, line for line: translated, say; by default `message` itself) with
    the diagnosis `line` before `message`'s hint line, else at its end ("" adds nothing)."""
    lines = (message if shown is None else shown).split("\n")
    if line:
        lines.insert(next((i for i, text in enumerate(message.split("\n")) if i and text.startswith(HINT)),
                          len(lines)), line)
    return "\n".join(lines)


@dataclass
class CheckResult:
    name: str
    component: str
    status: str
    score: float
    max_score: float
    cases_passed: int
    cases_total: int
    message: str = ""  # the first failing case's message, with the diagnosis line of `diagnosis`
    hidden: bool = False  # students see only passed/failed
    gated: str = ""  # why a gated check earned less than its cases would (course.yml `core:`), else ""
    # the known mistakes that explain its failing cases ({"id", "fields"}, engine/scoring.py named_mistakes)
    diagnosis: list[dict] = field(default_factory=list)
    # the first failing case's message as data (CaseResult.text), from which `message` was rendered
    text: str | dict = ""

    @property
    def student_message(self) -> str:
        """What a student may see: nothing of a hidden check but whether it passed (and why it was not paid)."""
        if self.hidden:
            from .i18n import _

            text = _("hidden check: passed") if self.status == PASSED else _("hidden check: failed")
        else:
            text = self.message
        return "\n".join(filter(None, [text, self.gated]))


@dataclass
class ComponentResult:
    id: str
    title: str
    status: str
    score: float
    max_score: float
    checks: list[CheckResult] = field(default_factory=list)
    message: str = ""  # why the component failed, in one place (first failing check, or a load error)
    hint: str = ""
    figures: list[str] = field(default_factory=list)  # pictures that would show the failure (grader/figures.py)


@dataclass
class Report:
    target: str
    components: list[ComponentResult]
    duration_s: float = 0.0
    protection: str = "none"  # the sandbox student code ran in (grader/sandbox/confine.py), or "in-process"

    # Points are whole hundredths (grader/course.py's POINT_UNITS): the rounding only drops float noise.
    @property
    def score(self) -> float:
        return round(sum(c.score for c in self.components), 6)

    @property
    def max_score(self) -> float:
        return round(sum(c.max_score for c in self.components), 6)

    def to_dict(self) -> dict:
        return {"target": self.target, "score": round(self.score, 2), "max_score": self.max_score,
                "duration_s": round(self.duration_s, 3), "protection": self.protection,
                "components": [asdict(c) for c in self.components]}
