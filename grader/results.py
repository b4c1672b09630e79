"""One result model under every report: check -> component -> total."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

PASSED, FAILED, ERROR, TIMEOUT, NOT_STARTED = "passed", "failed", "error", "timeout", "not started"
MESSAGE_LIMIT = 2000  # characters of a failure's message that a report carries (the worker sends no more)


@dataclass
class CaseResult:
    """One run of a check (one parametrization)."""

    nodeid: str
    check: str
    component: str
    status: str
    message: str = ""


@dataclass
class CheckResult:
    name: str
    component: str
    status: str
    score: float
    max_score: float
    cases_passed: int
    cases_total: int
    message: str = ""  # the first failing case's message
    hidden: bool = False  # students see only passed/failed
    gated: str = ""  # why a gated check earned less than its cases would (course.yml `core:`), else ""

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
