"""Which graded checks are hidden from students: one place every instructor channel asks.

course.yml marks them per component (`hidden: [check, ...]`, read by grader.course).
Hidden checks are left out of the student release, and Gradescope shows them only
after grades are published.
"""
from __future__ import annotations

from pathlib import Path

from .course import COURSE_FILE, load_course


def hidden_checks(path: str | Path = COURSE_FILE) -> frozenset[tuple[str, str]]:
    """{(component id, check name)} of every hidden check."""
    return frozenset((c.id, check) for c in load_course(path).components for check in c.hidden)
