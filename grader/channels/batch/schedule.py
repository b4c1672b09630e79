"""Which student a job grades next."""
from __future__ import annotations

import threading
from typing import Callable

from ...contract import COMPONENTS
from ...paths import CHECKS_DIR
from .discovery import Student


class Schedule:
    """Which student a job grades next: none whose code for a component another job is grading now.

    Students who hand in the same code for a component (the same correct
    solution, untouched stubs) would otherwise have it graded by several jobs
    at once; one after the other, the later ones take the results from the
    result cache. Without the cache (`keys` None) any student will do.
    """

    def __init__(self, students: list[Student], keys: Callable[[Student], frozenset[str]] | None) -> None:
        self.todo, self.keys = list(students), keys
        self.busy: set[str] = set()  # component keys being graded now (each by one student: see _free)
        self.held: dict[str, frozenset[str]] = {}  # student -> the keys it holds in `busy`
        self.graded: set[str] = set()  # component keys graded already: their results are in the cache
        self.changed = threading.Condition()

    def __len__(self) -> int:
        return len(self.todo)

    def take(self, stop: threading.Event) -> tuple[Student, bool] | None:
        """The next student (None when none is left), and whether it is all there is to grade for now
        (no other student being graded, and none that could be)."""
        with self.changed:
            while self.todo and not stop.is_set():
                student = next((s for s in self.todo if self._free(s)), None)
                if student is not None:
                    self.todo.remove(student)
                    alone = not self.held and not any(self._free(s) for s in self.todo)
                    self.held[student.name] = self.keys(student) - self.graded if self.keys else frozenset()
                    self.busy |= self.held[student.name]
                    return student, alone
                self.changed.wait(0.5)
            return None

    def done(self, student: Student) -> None:
        with self.changed:
            held = self.held.pop(student.name)
            self.busy -= held
            self.graded |= held
            self.changed.notify_all()

    def _free(self, student: Student) -> bool:
        return self.keys is None or self.busy.isdisjoint(self.keys(student) - self.graded)


def component_keys(student: Student) -> frozenset[str]:
    """One key per component of the student's code (grader/engine/cache.py's, which equal keys share results);
    none when the code cannot be read that way (the student is then scheduled as if unlike any other)."""
    from ...engine.cache import component_key

    try:
        return frozenset(component_key(student.folder, c, CHECKS_DIR, "") for c in COMPONENTS)
    except Exception:  # noqa: BLE001 - whatever a submission's files do to the parser, the batch goes on
        return frozenset()
