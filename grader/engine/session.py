"""One pytest session that grades submission after submission (the jobs of grade-all, `check --watch`).

Starting pytest (its configuration, its plugins, collecting the check files)
costs a job more per student than some components' checks do. Here the checks
are collected once; each submission then runs the items of the components it
needs, against its own folder, with workers of its own: the session-scoped
fixture that holds them is torn down after each submission's last item.
"""
from __future__ import annotations

import os
from contextlib import redirect_stdout
from typing import Callable, Iterable, TypeVar

import pytest

from ..contract import COMPONENTS
from ..errors import GraderError
from ..paths import CHECKS_DIR, EXERCISES
from ..results import CaseResult
from ..sandbox.confine import NONE, Plan
from ..sandbox.protocol import Limits
from .plugin import SUBMISSION, Collector, Submission, plugins, pytest_args

Task = TypeVar("Task")


class CheckSession:
    """The open session, as `run_checks(..., session=)` uses it."""

    def __init__(self, session: pytest.Session, collector: Collector) -> None:
        self._session, self._collector = session, collector
        self._items = list(session.items)
        self._reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def run(self, components: list[str], folder: str, limits: Limits, load_errors: dict[str, str],
            plan: Plan) -> list[CaseResult]:
        """Run the checks of `components` against `folder` (a private copy, confined as `plan` says)."""
        submission = self._session.config.stash[SUBMISSION]
        submission.folder, submission.plan, submission.limits = folder, plan, limits
        submission.broken = dict(load_errors)
        submission.crossed, submission.alone = set(), set()
        items = [item for item in self._items if item.get_closest_marker("component").args[0] in components]
        self._session.items = items  # the workers' fixture starts one worker per component found here
        self._collector.cases.clear()
        if self._reporter is not None:
            self._reporter.stats.clear()  # nobody reads them; a long batch would pile them up
        for item, next_item in zip(items, [*items[1:], None]):
            # after the last item (next_item None) every fixture is torn down, the workers with them
            item.ihook.pytest_runtest_protocol(item=item, nextitem=next_item)
        submission.grade_crossed_again(items, self._session.config)
        return list(self._collector.cases.values())


class _Loop:
    """A pytest plugin whose test loop calls `each(task, check_session)` for every task."""

    def __init__(self, tasks: Iterable, each: Callable, collector: Collector) -> None:
        self.tasks, self.each, self.collector = tasks, each, collector

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        check_session = CheckSession(session, self.collector)
        for task in self.tasks:
            self.each(task, check_session)
        return True


def serve_in_session(tasks: Iterable[Task], each: Callable[[Task, CheckSession], None], limits: Limits,
                     components: Iterable[str] = COMPONENTS) -> None:
    """Call `each(task, session)` for every task, all in one pytest session that holds the checks of `components`.

    `each` must not raise: an exception ends the session (GraderError), and
    the tasks not taken yet are left in `tasks` when it is an iterator. Ctrl-C
    (KeyboardInterrupt), in `each` or while `tasks` waits, ends the session and
    is raised again here.
    """
    collector = Collector()
    files = [CHECKS_DIR / f"test_{component}.py" for component in components]
    args = pytest_args(files)
    submission = Submission(str(EXERCISES), Plan.for_copy(NONE, EXERCISES), limits)  # each task sets its own
    with open(os.devnull, "w") as devnull, redirect_stdout(devnull):  # pytest's own report goes nowhere
        code = pytest.main(args, plugins=[collector, *plugins(submission), _Loop(tasks, each, collector)])
    if code == pytest.ExitCode.INTERRUPTED and not collector.broken_checks:  # else a check file that breaks
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):
        raise GraderError(f"the checks' session ended early (pytest exit {int(code)})")
