"""The grader's pytest plugins, and the command line of the pytest sessions that run the checks.

`Collector` records each check's outcome as a CaseResult; `PlainFailures`
gives a failing check's report its student-facing message instead of a
formatted traceback; `Shard` keeps one grading process's share of the cases.
`describe_failure` words a failure for a student (also for plain pytest,
grader/engine/checks.py).
"""
from __future__ import annotations

import os
import signal
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest
from _pytest.runner import runtestprotocol  # pytest's own protocol, as plugins that rerun checks call it

from ..contract import FILES
from ..paths import PYPROJECT, ROOT
from ..results import ERROR, FAILED, MESSAGE_LIMIT, NOT_STARTED, PASSED, TIMEOUT, CaseResult, CheckFailure
from ..sandbox.confine import Plan
from ..sandbox.loader import ImplementationLoadError
from ..sandbox.protocol import Limits, LoadFailed, NotStarted, StudentError, StudentTimeout
from ..text import Phrase, data

OVERRUN = Phrase("timed out: the code did not finish in time (an endless loop?)")


class CheckOverran(Exception):
    """A check ran past the session's last-resort deadline (each request to a worker has its own, shorter one)."""


class Collector:
    """A pytest plugin that records each check's outcome as a CaseResult."""

    def __init__(self) -> None:
        self.cases: dict[str, CaseResult] = {}
        self.broken_checks: list[str] = []  # check files that could not be collected: a grader error

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed:
            self.broken_checks.append(f"{report.nodeid or report.fspath}:\n{report.longreprtext[-1500:]}")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if report.when != "call" and report.passed:  # (before the marker: a lookup up the node tree)
            return
        marker = item.get_closest_marker("component")
        if marker is None:
            return
        check = getattr(item, "originalname", item.name)
        case = CaseResult(item.nodeid, check, marker.args[0], PASSED)
        if report.failed:
            case.status, message = _classify(call, report)
            failure = call.excinfo.value if call.excinfo is not None else None
            if isinstance(failure, CheckFailure):  # its diagnosis travels by id, worded where it is scored
                message = failure.message
                case.matched, case.ruled_out = failure.matched, failure.ruled_out
            case.message, case.text = str(message)[:MESSAGE_LIMIT], data(message, MESSAGE_LIMIT)
        previous = self.cases.get(item.nodeid)
        if previous is None or previous.status == PASSED:
            self.cases[item.nodeid] = case


class PlainFailures:
    """A pytest plugin: a failing check's report carries its student-facing message, not a formatted traceback.

    Nothing here reads pytest's tracebacks, and formatting one (reading and
    laying out the source of every frame) costs more than many checks take. Nor
    does anything read a report's location or keywords: pytest works both out
    for every phase of every check (finding the check's source file and line,
    walking its markers), a tenth of its own time per check.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport | None:
        excinfo = call.excinfo
        if excinfo is None:
            outcome, longrepr = "passed", None
        elif excinfo.errisinstance((pytest.skip.Exception, pytest.xfail.Exception)):
            return None  # pytest's own report
        else:
            outcome, longrepr = "failed", str(describe_failure(excinfo.value)[1])[:MESSAGE_LIMIT]
        return pytest.TestReport(item.nodeid, (item.nodeid.partition("::")[0], None, item.name), {}, outcome,
                                 longrepr, call.when, duration=call.duration, start=call.start, stop=call.stop)


class Unlogged:
    """A pytest plugin: each check runs as pytest runs it (setup, call, teardown, each reported to the
    Collector), without the log hooks around it that only a terminal report reads: working out every
    check's location for `pytest_runtest_logstart` and laying out its line cost more than small checks do."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool:
        runtestprotocol(item, log=False, nextitem=nextitem)
        return True


def _classify(call: pytest.CallInfo, report: pytest.TestReport) -> tuple[str, str]:
    if call.excinfo is None:
        return FAILED, str(report.longrepr)[:MESSAGE_LIMIT]
    return describe_failure(call.excinfo.value)


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """A failing check's status and the message a student reads (also plain pytest's, grader/engine/checks.py).

    Never a grader module or class name: the checks' own messages (AssertionError),
    what student code raised, or how it crashed or hung, as grader/sandbox/protocol.py words it.
    """
    if isinstance(exc, NotStarted):
        status = NOT_STARTED
    elif isinstance(exc, (LoadFailed, ImplementationLoadError)):
        status = ERROR
    elif isinstance(exc, StudentTimeout):
        status = TIMEOUT
    elif isinstance(exc, (StudentError, AssertionError)):
        status = FAILED
    elif isinstance(exc, CheckOverran):
        return TIMEOUT, OVERRUN
    else:  # a check's own code raised (say on a value of the wrong type): its type and words, no path
        return FAILED, f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
    if len(exc.args) == 1 and isinstance(exc.args[0], Phrase):  # its texts kept (each cut where it is stored)
        return status, exc.args[0]
    return status, str(exc)[:MESSAGE_LIMIT]


class Shard:
    """One grading process's part: a session's command line and submission, and a pytest plugin that runs the
    check files in the order given (`files`: the planner's, longest first) and keeps every `count`-th check
    case, starting at `index`."""

    def __init__(self, files: list[Path], submission: "Submission", index: int = 0, count: int = 1) -> None:
        self.args, self.submission, self.index, self.count = pytest_args(files), submission, index, count
        self.order = {Path(f).name: i for i, f in enumerate(files)}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: self.order.get(item.path.name, len(self.order)))  # (a stable sort)
        if self.count > 1:
            items[:] = items[self.index::self.count]


def last_resort_s(limits: Limits) -> float:
    """How long a whole check may run in a grading session: its requests' time three times over, and half a minute
    for the check's own work."""
    return limits.timeout_s * 3 + 30


class LastResort:
    """A pytest plugin: each check runs under a deadline of the session's own, its last resort (each request to a
    worker has its own, shorter one), past which the check fails with CheckOverran: a type of our own, not a
    message to match. A timer of its own, not pytest-timeout's: that plugin's hooks around every check cost
    about a tenth of pytest's own time per check."""

    def __init__(self, submission: "Submission") -> None:
        self.submission = submission  # (its limits change between the submissions a long session grades)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            return (yield)  # (signals reach the main thread only; Windows has no timer: the requests' deadlines hold)
        limit = last_resort_s(self.submission.limits)

        def overran(signum, frame):
            raise CheckOverran(f"the check ran past {limit:g} s")

        previous = signal.signal(signal.SIGALRM, overran)
        signal.setitimer(signal.ITIMER_REAL, limit)
        try:
            return (yield)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)


@dataclass(eq=False)  # a plugin: pytest 8 keeps its plugins in sets (hashed by identity)
class Submission:
    """A pytest plugin that tells the check files' plugin (grader/engine/checks.py) what it grades: the
    submission's private copy, how its workers are confined and limited, and the files known not to load.
    A grading session registers one; plain pytest has none and reads its command line instead."""

    folder: str
    plan: Plan
    limits: Limits
    broken: dict[str, str] = field(default_factory=dict)
    # The loader may still be at work when the session starts: this waits for what it found (then `broken`).
    pending: Callable[[], dict[str, str]] | None = field(default=None, compare=False, repr=False)
    # Whether components may share workers (grader/engine/planning.py's SHARED_WORKERS): only where this plugin
    # runs the session's checks, so that those whose code reaches a worker-mate's (`crossed`) are graded again,
    # each in a worker of its own (`alone`), before the session ends.
    share: bool = True
    crossed: set[str] = field(default_factory=set)
    alone: set[str] = field(default_factory=set)

    def pytest_configure(self, config: pytest.Config) -> None:
        config.stash[SUBMISSION] = self

    def known_broken(self) -> dict[str, str]:
        """The files known not to load, once the loader has tried every one."""
        if self.pending is not None:
            self.broken, self.pending = dict(self.pending()), None
        return self.broken

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        """A component whose files do not load is not run: its score says why (grader/engine/scoring.py)."""
        broken = self.known_broken()
        if not broken:
            return
        kept, dropped = [], []
        for item in items:
            marker = item.get_closest_marker("component")
            (dropped if marker is not None and not loads(marker.args[0], broken) else kept).append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        yield
        self.grade_crossed_again(session.items, session.config)

    def grade_crossed_again(self, items: list[pytest.Item], config: pytest.Config) -> None:
        """Run again the checks of the components whose code reached a worker-mate's names, each component in a
        worker of its own this time; their first results are forgotten.

        `crossed` is a worker's word (student code may forge it): it buys a component one more grading at most,
        never a loop. A component graded alone is not graded again, whatever is said of it (a worker of its own
        has no mates to reach, and its handle ignores the flag there: `Worker.crossed_over`)."""
        collectors = [p for p in config.pluginmanager.get_plugins() if isinstance(p, Collector)]
        once = self.crossed - self.alone
        self.crossed.clear()
        if not once:
            return
        again = [item for item in items if item.get_closest_marker("component").args[0] in once]
        self.alone |= once
        for item in again:
            for collector in collectors:
                collector.cases.pop(item.nodeid, None)
        for item, nextitem in zip(again, [*again[1:], None]):
            item.ihook.pytest_runtest_protocol(item=item, nextitem=nextitem)
        self.crossed.clear()

    def __getstate__(self) -> dict:  # (to a forked grading process: what is pending there comes by its own pipe)
        return {**self.__dict__, "pending": None}


SUBMISSION = pytest.StashKey[Submission]()


def loads(component: str, broken: dict[str, str]) -> bool:
    """Whether every file of `component` loads (none is among the `broken` ones): only then are its checks run."""
    return not any(f in broken for f in FILES[component])


def plugins(submission: Submission) -> list[object]:
    """The plugins every grading session of the checks runs with, besides a Collector."""
    _argnames_without_signature()
    return [submission, PlainFailures(), Unlogged(), LastResort(submission)]


def _argnames_without_signature() -> None:
    """Spare pytest an `inspect.signature` of a function that takes no arguments.

    pytest 9 makes a new FixtureDef for `request` each time a case's fixture or parameter asks for it (about ten
    times a case here), each around `lambda: request`, whose argument names it finds by `inspect.signature`: a
    fifth of pytest's own time per case. A plain function whose code takes no arguments has none to find.
    """
    import types

    import _pytest.fixtures as fixtures

    found = getattr(fixtures, "getfuncargnames", None)
    if found is None or getattr(found, "_without_signature", False):
        return

    def getfuncargnames(function, *args, **kwargs):
        code = getattr(function, "__code__", None)
        if (type(function) is types.FunctionType and code.co_argcount == 0 and code.co_kwonlyargcount == 0
                and not hasattr(function, "__wrapped__") and "__signature__" not in function.__dict__):
            return ()
        return found(function, *args, **kwargs)

    getfuncargnames._without_signature = True  # type: ignore[attr-defined]
    fixtures.getfuncargnames = getfuncargnames


def pytest_args(files: list[Path]) -> list[str]:
    """The command line of a grading session: the check files and pytest's own settings (the submission
    itself travels in a `Submission` plugin, the last-resort deadline in `LastResort`)."""
    return [*_paths(files), "-p", "no:cacheprovider", "-q", "--tb=no", "--no-header",
            # only the plugins the checks need, not every one installed (anyio's costs 0.2 s)
            "--disable-plugin-autoload",
            # Student code never runs in this process, so capturing output (the plugin wraps every phase of
            # every check even when told not to capture), turning warnings into errors and these plugins guard
            # nothing here, and cost time on every check. Every assert in the checks has its own message: none
            # needs rewriting.
            "-p", "no:capture", "--assert=plain", "-p", "no:warnings",
            "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:logging",
            # and no check uses these (registering a plugin costs a millisecond or two per session)
            *[arg for name in ("doctest", "junitxml", "pastebin", "stepwise", "setuponly", "setupplan", "legacypath",
                               "debugging", "tmpdir", "monkeypatch", "recwarn", "python_path", "faulthandler", "skipping",
                               "subtests", "unittest") for arg in ("-p", f"no:{name}")],
            "--rootdir", str(ROOT), "-c", str(PYPROJECT)]


def _paths(files: list[Path]) -> list[str]:
    """`files` as pytest's arguments: their folder, less everything else in it, where they share one.

    pytest collects the folder of each file named on its command line again for that file (and makes a node
    for each of its check files each time): the folder once, with the rest left out, is collected once.
    """
    folders = {Path(f).parent for f in files}
    if len(folders) != 1 or not all(Path(f).is_file() for f in files):  # (pytest says which is missing)
        return [*map(str, files)]
    folder = folders.pop()
    keep = {Path(f).name for f in files} | {"conftest.py"}
    return [str(folder), *(f"--ignore={entry.path}" for entry in os.scandir(folder) if entry.name not in keep)]
