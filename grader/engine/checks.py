"""The pytest plugin of the graded checks: what `tests/conftest.py` loads.

The implementation under test is chosen at run time, never by import path:
`pytest tests --target DIR` (or DRILLS_TARGET=DIR); `exercises/` by default.
Each check file grades one component, `test_<component>.py`; its checks get a
target in which every other component's code is a trusted stand-in.

Where student code runs is a strategy chosen once per session: a grading
session registers a `Submission` plugin (grader/engine/plugin.py), and student
code runs in worker processes (`WorkerPool`) confined and limited as it says;
plain pytest runs it in-process (`InProcess`), which is simplest for a
learner's own machine, or in workers with `--isolation=process`.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path

import pytest
import torch

from ..contract import COMPONENTS, component_modules
from ..course import load_course
from ..paths import EXERCISES
from ..results import MESSAGE_LIMIT
from ..sandbox import spawner
from ..sandbox.confine import Plan
from ..sandbox.handle import RemoteExecutor, Worker
from ..sandbox.protocol import Limits, StudentTimeout, call_label
from ..text import Phrase
from .planning import worker_group
from .reach import pieces_for
from .plugin import SUBMISSION, Submission, describe_failure
from .target import Target, open_target

torch.set_num_threads(1)  # the checks' tensors are tiny: threads only cost time


def pytest_addoption(parser: pytest.Parser) -> None:
    course = load_course()
    parser.addoption("--target", default=os.environ.get("DRILLS_TARGET", str(EXERCISES)),
                     help="folder with the implementation to grade (default: exercises/)")
    parser.addoption("--isolation", choices=["inprocess", "process"],
                     default=os.environ.get("DRILLS_ISOLATION", "inprocess"),
                     help="run student code in this process or in worker processes")
    parser.addoption("--check-timeout", type=float, default=course.timeout,
                     help="seconds per check (process isolation; default: course.yml)")
    parser.addoption("--memory-mb", type=int, default=course.memory_mb,
                     help="memory a worker may use (process isolation; default: course.yml)")
    parser.addoption("--broken", action="append", default=[], metavar="FILE=REASON",
                     help="a file already known not to load, with the reason")
    parser.addoption("--sandbox", default="none", help="the workers' confinement (grader/sandbox/confine.py; process "
                     "isolation; the target must then be a copy made by grader.source.private_copy)")


def component_of(module_name: str) -> str:
    component = module_name.rpartition(".")[2].removeprefix("test_")
    if component not in COMPONENTS:
        raise RuntimeError(f"check file test_{component}.py does not name a component")
    return component


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each check file's items are its component's: the marker goes on the file, which its items inherit."""
    for module in dict.fromkeys(item.getparent(pytest.Module) for item in items):
        if module is not None:
            module.add_marker(pytest.mark.component(component_of(module.module.__name__)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """Plain pytest reports a failing check as the grader does: its message, not pytest's traceback.

    The message already says where student code raised (its own file and line);
    the grader's frames and the tensors in them teach nothing. `--tb=long` or
    `--tb=native` keeps pytest's full report (for whoever works on the checks);
    the grader asks for none (`--tb=no`) and reads the exception itself.
    """
    outcome = yield
    report = outcome.get_result()
    if (not report.failed or call.excinfo is None
            or item.config.getoption("tbstyle", "auto") not in ("auto", "short")):
        return
    report.longrepr = str(describe_failure(call.excinfo.value)[1])[:MESSAGE_LIMIT]


class InProcess:
    """Student code in the checks' own process (plain pytest): a fresh package per check."""

    def __init__(self, config: pytest.Config) -> None:
        self.folder = config.getoption("--target")

    def target(self, component: str, trusted: tuple[str, ...] = ()) -> Target:
        return open_target(self.folder, isolate_for=component, trusted=trusted)

    def close(self) -> None:
        pass


def submission_of(config: pytest.Config) -> Submission | None:
    """What a grading session grades (its Submission plugin); from the command line with --isolation=process;
    None when student code runs in this process (plain pytest)."""
    if SUBMISSION in config.stash:
        return config.stash[SUBMISSION]
    if config.getoption("--isolation") != "process":
        return None
    folder = str(Path(config.getoption("--target")).resolve())
    return Submission(folder, Plan.for_copy(config.getoption("--sandbox"), folder),
                      Limits(timeout_s=config.getoption("--check-timeout"), memory_mb=config.getoption("--memory-mb"),
                             forbidden=load_course().forbidden),
                      dict(item.split("=", 1) for item in config.getoption("--broken")), share=False)


class WorkerPool:
    """Student code in workers: one per component (and set of trusted names), started early, kept all session;
    the components of a SHARED_WORKERS group share one (grader/engine/planning.py), but for those that
    reached a mate's code in this grading (`Submission.alone`), which get one of their own."""

    # Workers started ahead of the checks that use them. All at once, a session's dozen workers set themselves up
    # side by side, and the first check waited for its worker 0.1-0.3 s; one or two ahead, each worker gets ready
    # while the checks before it run.
    AHEAD = 2

    def __init__(self, submission: Submission) -> None:
        self.folder, self.plan, self.limits = submission.folder, submission.plan, submission.limits
        self.broken = dict(submission.known_broken())
        self.share, self.alone, self.crossed = submission.share, submission.alone, submission.crossed
        self.workers: dict[tuple[frozenset[str], tuple[str, ...]], Worker] = {}
        self._order: list[str] = []  # the session's components, in the order their checks run
        self.spent: dict[str, float] = {}  # component -> seconds of student time its checks waited in this process
        # component -> the calls that hung in its checks: later ones fail at once and cost no budget, wherever the
        # checks run (a worker's own memory of them, Worker.timed_out, is cleared when it switches components)
        self.hung: dict[str, set[str]] = {}

    def prespawn(self, components: list[str]) -> None:
        """Start the workers of the first components now; each later one starts when the checks of the
        component `AHEAD` places before it begin (it imports its files while they run)."""
        self._order = list(components)
        self._spawn_ahead(self._order[:self.AHEAD])

    def _spawn_ahead(self, components: list[str]) -> None:
        if spawner.spawning():  # one worker serves them all in turn (`target`): it starts with the first
            components = [] if self.workers else components[:1]
        for component in components:
            self._worker(component).spawn()

    def _shared(self, component: str, trusted: tuple[str, ...]) -> frozenset[str]:
        """The components whose checks share `component`'s worker (empty: it has one of its own)."""
        return frozenset() if trusted or not self.share or component in self.alone \
            else worker_group(component) - self.alone

    def _identity(self, component: str, trusted: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str] | None]:
        """The mates and the stand-in pieces of `component`'s worker."""
        shared = self._shared(component, trusted)
        mates = shared if len(shared) > 1 else frozenset()
        return mates, pieces_for(self.folder, component, mates - {component}, trusted)

    def _worker(self, component: str, trusted: tuple[str, ...] = ()) -> Worker:
        key = ("spawned",) if spawner.spawning() else (self._shared(component, trusted) or frozenset({component}),
                                                       trusted)  # (spawned: see `target`)
        if key not in self.workers:
            mates, pieces = self._identity(component, trusted)
            self.workers[key] = Worker(self.plan, component, self.limits, self.broken,
                                       component_modules(component), trusted, mates, self.crossed, pieces)
        return self.workers[key]

    def target(self, component: str, trusted: tuple[str, ...] = ()) -> Target:
        if component in self._order:
            place = self._order.index(component)
            self._spawn_ahead(self._order[place + 1:place + 1 + self.AHEAD])
        worker = self._worker(component, trusted)
        if spawner.spawning():
            # Started without fork, a worker costs an import of torch (a second or more): one serves every
            # component in turn, each with the stand-ins and mates its own worker would hold, the process put back
            # as it was in between (sandbox/state.py) or else replaced, as a worker that mates share is.
            worker.switch(component, component_modules(component), trusted, *self._identity(component, trusted))
        else:
            worker.switch(component, component_modules(component))
        if self.plan.budget is None:
            return Target(RemoteExecutor(worker, self.limits.timeout_s))
        return Target(BudgetedExecutor(worker, self.limits.timeout_s, self, component))

    def close(self) -> None:
        for worker in self.workers.values():
            worker.kill(how_it_ended=False)


class BudgetedExecutor(RemoteExecutor):
    """A check's requests under the component's budget of student time (all its checks together, in this grading
    process) and the submission's deadline besides the check's own (grader/sandbox/budget.py): past either,
    each request fails at once as a timeout, so a component whose every case waits just under the check's
    deadline cannot take the whole time and keep its points, and the grade completes."""

    def __init__(self, worker, timeout_s: float, pool: "WorkerPool", component: str) -> None:
        super().__init__(worker, timeout_s)
        self.check_timeout_s, self.pool, self.component = timeout_s, pool, component

    def run(self, op: str, **request):
        import time

        budget = self.pool.plan.budget
        hung = self.pool.hung.setdefault(self.component, set())
        label = call_label(op, request)
        if label in hung:
            raise StudentTimeout("Timeout", Phrase("skipped: `{call}` timed out in an earlier check", call=label))
        component_left = budget.component_s - self.pool.spent.get(self.component, 0.0)
        submission_left = budget.submission_deadline - time.monotonic()
        left = min(component_left, submission_left)
        if left <= 0:
            raise StudentTimeout("Timeout", self._over(component_left <= submission_left))
        self.timeout_s = min(self.check_timeout_s, self.waited + left)  # this check's deadline, cut to the budget
        started = time.monotonic()
        try:
            return super().run(op, **request)
        except StudentTimeout as exc:
            if time.monotonic() - started >= self.timeout_s - 0.05:  # it waited out its deadline: it hung
                hung.add(label)
            if self.timeout_s < self.check_timeout_s and time.monotonic() - started >= left - 0.05:
                raise StudentTimeout("Timeout", self._over(component_left <= submission_left)) from exc
            raise
        finally:
            # at most a check's deadline: a first request also waits for its worker to start (the import, under
            # startup_s), sooner or later as the workers were started ahead, which must not change the budget
            waited = min(time.monotonic() - started - self.worker.starting_s, self.check_timeout_s)
            self.pool.spent[self.component] = self.pool.spent.get(self.component, 0.0) + waited
            self.timeout_s = self.check_timeout_s

    def _over(self, component: bool) -> str:
        budget = self.pool.plan.budget
        if component:
            return (f"timed out: `{self.component}` used up its {budget.component_s:g} s of student time "
                    f"(all its checks together)")
        return "timed out: the submission used up its time (every component together)"


@pytest.fixture(scope="session")
def _targets(request: pytest.FixtureRequest):
    """Where this session runs student code (InProcess or WorkerPool)."""
    submission = submission_of(request.config)
    if submission is None:
        yield InProcess(request.config)
        return
    pool = WorkerPool(submission)
    components = [m.args[0] for item in request.session.items for m in item.iter_markers("component")]
    pool.prespawn(list(dict.fromkeys(components)))
    yield pool
    pool.close()


@pytest.fixture
def impl(request: pytest.FixtureRequest, _targets) -> Target:
    """The implementation under test, isolated for this file's component."""
    target = _targets.target(component_of(request.module.__name__))
    yield target
    target.close()


@pytest.fixture
def trusted_impl(request: pytest.FixtureRequest, _targets) -> Target:
    """Like `impl`, in a worker of its own that also holds the grader's versions of the names the check file
    lists in `TRUSTED` (say a trusted KVCache for kv_cache's checks): names of this very component, so
    never in the worker where the student's own versions of them are graded."""
    target = _targets.target(component_of(request.module.__name__), tuple(getattr(request.module, "TRUSTED", ())))
    yield target
    target.close()


@pytest.fixture
def target_folder(request: pytest.FixtureRequest) -> str:
    """The implementation's folder, for checks that only read its source."""
    submission = submission_of(request.config)
    return submission.folder if submission is not None else str(Path(request.config.getoption("--target")).resolve())


@pytest.fixture
def gen(request: pytest.FixtureRequest) -> torch.Generator:
    """A generator seeded from the check's name: inputs are the same on every run."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))
