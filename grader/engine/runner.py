"""Grade an implementation folder: plan who runs what, run the checks in pytest, score them by course.yml.

Student code runs only in worker processes (grader/sandbox/). A grading
copies the submission privately, finds the files that cannot be loaded,
shares the components' checks out between this process and forked helper
processes (each with workers of its own), and scores what comes back.
"""
from __future__ import annotations

import io
import os
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

import pytest

from ..contract import FILES
from ..course import Component, Course, load_course
from ..errors import GraderError
from ..i18n import _, language
from ..paths import CHECKS_DIR
from ..results import CaseResult, Report
from ..sandbox import budget, confine, spawner
from ..sandbox.confine import Plan
from ..sandbox.handle import Worker, WorkerDied, WorkerTimeout
from ..sandbox.protocol import Limits
from ..sandbox.reaper import kill_strays
from ..sandbox.zygote import ZYGOTE
from ..source import private_copy
from ..text import Phrase
from .cache import ResultCache
from .forked import Forked
from .planning import plan_shards
from .plugin import Collector, Shard, Submission, loads, plugins
from .scoring import score_component

if TYPE_CHECKING:
    from .session import CheckSession

# Two grading processes where two cores are ours: one waits on its workers half the time.
PROCESSES = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 2)


def protection() -> str:
    """The sandbox the workers of this process get (grader/sandbox/confine.py), probed once."""
    return confine.choose()


_warned: set[str] = set()


def require_protection(chosen: str, own_code: bool = False) -> None:
    """Refuse to grade with a protection weaker than accepted; a learner checking their own code is warned
    instead, once per process, on stderr."""
    if not confine.refused(chosen):
        return
    why = _(confine.REFUSED).format(intended=confine.INTENDED, strongest=_(confine.describe(chosen)), chosen=chosen,
                                    variable=confine.ACCEPT_VARIABLE)
    if not own_code:
        raise GraderError(why)
    if chosen not in _warned:
        _warned.add(chosen)
        import sys

        print(_("WARNING: {why}\nChecking your own code anyway.").format(why=why), file=sys.stderr)


def budget_for(course: Course | None = None, timeout: float | None = None) -> "budget.Budget":
    """The budgets of one grading (grader/sandbox/budget.py) from course.yml; `timeout` (--timeout) scales the
    per-component and per-submission ones as it changes the per-check one."""
    course = course or load_course()
    scale = timeout / course.timeout if timeout else 1.0
    return budget.for_grading(course.memory_mb, course.component_timeout * scale, course.submission_timeout * scale)


def limits_for(course: Course | None = None, timeout: float | None = None) -> Limits:
    """Each check's time and each worker's memory: course.yml's, or `timeout` seconds per check."""
    course = course or load_course()
    return Limits(timeout_s=timeout or course.timeout, memory_mb=course.memory_mb, forbidden=course.forbidden)


@dataclass
class Grading:
    """One grading of one folder: what is graded, where its private copy is, and how it is confined."""

    target: str  # the submission as named (reports show it)
    folder: str  # its private copy, which the workers read
    plan: Plan
    limits: Limits
    components: list[Component]
    checks_dir: Path = CHECKS_DIR
    unreadable: dict[str, str] = field(default_factory=dict)  # file -> why it could not be copied

    def files(self, components: list[Component]) -> list[str]:
        return sorted({f for c in components for f in FILES[c.id]})

    def shard(self, components: list[str], load_errors: dict[str, str], index: int = 0, count: int = 1) -> Shard:
        """What one grading process runs: these components' checks against the copy (every `count`-th case)."""
        return Shard([self.checks_dir / f"test_{c}.py" for c in components],
                     Submission(self.folder, self.plan, self.limits, load_errors), index, count)


def run_checks(target: str | Path, components: list[str] | None = None, *, course: Course | None = None,
               checks_dir: Path = CHECKS_DIR, timeout: float | None = None, cache: ResultCache | None = None,
               processes: int = PROCESSES, session: CheckSession | None = None, own_code: bool = False,
               lang: str | None = None) -> Report:
    """Grade the implementation in `target`; `components` limits it to some component ids. The report's
    messages are in `lang` (default: the language in use).

    The cases are shared out over `processes` grading processes (forks of this
    one, each with its own workers). With a `cache`, a component whose code (its
    syntax tree, see grader/engine/cache.py) was graded before gets the earlier
    results. With a `session` (grader/engine/session.py) the checks run in that
    open pytest session, in this process. Where the protection in force is weaker than the run accepts
    (`confine.refused`), grading refuses (GraderError), unless the learner checks their `own_code`: then it
    warns on stderr.
    """
    course = course or load_course()
    started = time.perf_counter()
    selected = [course.component(c) for c in components] if components else list(course.components)
    if spawner.spawning():  # the other grading processes are forks too
        processes = 1
    ZYGOTE.start()
    chosen = protection()
    require_protection(chosen, own_code)
    with private_copy(target, reachable=chosen == confine.USERS) as (folder, unreadable), \
            confine.hidden_while_grading(chosen), budget.bound_grader(course.grader_memory_mb):
        grading = Grading(str(target), folder, Plan.for_copy(chosen, folder, budget_for(course, timeout)),
                          limits_for(course, timeout), selected, checks_dir, unreadable or {})
        report = _grade(grading, cache, 1 if session is not None else max(processes, 1), session, lang or language())
    report.duration_s = time.perf_counter() - started
    return report


def _grade(grading: Grading, cache: ResultCache | None, processes: int, session: CheckSession | None,
           lang: str) -> Report:
    settings = f"{grading.limits}|process"
    keys = {c.id: cache.key(grading.folder, c.id, grading.checks_dir, settings) for c in grading.components} \
        if cache else {}
    cases: dict[str, CaseResult] = {}
    to_run = []
    for component in grading.components:
        earlier = cache.get(keys[component.id]) if cache else None
        if earlier is None:
            to_run.append(component)
        else:
            cases.update({case.nodeid: case for case in earlier})
    runnable: list[Component] = []
    load_errors: dict[str, str] = {}
    loader = Worker(grading.plan, None, grading.limits) if to_run and Path(grading.folder).is_dir() else None
    if loader is not None:
        loader.spawn()  # the zygote forks it while this process forks the others
    # the other grading processes fork now, before any worker (and the thread draining its output) exists
    helpers = [Forked(_run_shard_in_fork, then=_end_of_fork) for _ in range(1, processes)] if to_run else []
    try:
        loading = Loading(grading, grading.files(to_run), loader)
        if session is not None:
            load_errors = loading.result()
            ids = [c.id for c in to_run if loads(c.id, load_errors)]
            new = session.run(ids, grading.folder, grading.limits, load_errors, grading.plan) if ids else []
        else:
            new = _run_shards(grading, [c.id for c in to_run], helpers, loading)
            load_errors = loading.result()
        runnable = [c for c in to_run if loads(c.id, load_errors)]
        cases.update({case.nodeid: case for case in new})
    finally:
        spawner.end_all()
        kill_strays()
    if cache:
        for component in runnable:
            cache.put(keys[component.id], [case for case in cases.values() if case.component == component.id])
    results = [score_component(c, list(cases.values()), load_errors, lang) for c in grading.components]
    return Report(grading.target, results, 0.0, grading.plan.protection)


def _run_shards(grading: Grading, components: list[str], helpers: list[Forked], loading: "Loading") -> list[CaseResult]:
    """Run the checks of `components`, shared out between this process and the `helpers`.

    The sessions start while the loader is still at work: each learns which files do not load by the
    end of its collection (`Submission.known_broken`), and leaves their components' checks out.
    """
    shards = [grading.shard(group, {}, index, count) for group, index, count in plan_shards(components, len(helpers) + 1)]
    for helper, shard in zip(helpers, [*shards[1:], *[None] * len(helpers)]):
        helper.send(shard)
    loading.tell(helpers[:len(shards) - 1])
    cases = []
    if components:
        shards[0].submission.pending = loading.result
        cases = run_shard(shards[0])
    for helper in helpers:
        cases += helper.result()
    return cases


def run_shard(shard: Shard) -> list[CaseResult]:
    """Run one shard's pytest session in this process; the cases' results."""
    collector = Collector()
    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        code = pytest.main(shard.args, plugins=[collector, *plugins(shard.submission), shard])
    if collector.broken_checks:
        raise GraderError("the checks could not be collected:\n" + "\n".join(collector.broken_checks))
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED):  # (all left out)
        raise GraderError(f"the checks could not run (pytest exit {int(code)}):\n{err.getvalue()[-2000:]}"
                          f"{out.getvalue()[-2000:]}")
    return list(collector.cases.values())


def _run_shard_in_fork(receive: Callable[[], Any]) -> list[CaseResult]:
    """A forked grading process's part (None: nothing left for it); the files that do not load come next."""
    shard = receive()
    if shard is None:
        return []
    shard.submission.pending = receive
    ZYGOTE.start_own()
    return run_shard(shard)


def _end_of_fork() -> None:
    """What a forked grading process started is ended once its results have gone (not before: the first
    process waits for them). One that had nothing to grade started nothing: the zygote it knows of is the
    first process's."""
    if ZYGOTE.owner == os.getpid():
        kill_strays()
        ZYGOTE.stop()


class Loading:
    """The loader trying every file of the submission, in a thread of its own, while the checks' sessions start.

    It waits on its worker nearly all the time; it is the only user of the zygote until `result()` is
    taken, and `result()` is taken before any check's worker is asked for (the workers need to know what
    does not load). `tell(helpers)` has the answer sent on to forked grading processes as well.
    """

    def __init__(self, grading: Grading, files: list[str], loader: Worker | None) -> None:
        self._grading, self._files, self._loader = grading, files, loader
        self._errors: dict[str, str] = {}
        self._failure: BaseException | None = None
        self._helpers: list[Forked] = []
        self._told = threading.Event()
        self._thread = threading.Thread(target=self._load, daemon=True) if loader is not None or files else None
        if self._thread is not None:
            self._thread.start()

    def tell(self, helpers: list[Forked]) -> None:
        self._helpers = helpers
        self._told.set()

    def _load(self) -> None:
        try:
            errors = _load_errors(self._grading, self._files, self._loader)
            errors.update({f: why for f, why in self._grading.unreadable.items() if f in errors})
            self._errors = errors
        except BaseException as exc:  # noqa: BLE001 - raised again where the result is taken
            self._failure = exc
        self._told.wait()
        for helper in self._helpers:
            try:
                helper.send(self._errors)
            except OSError:  # it has ended already: its result says why
                pass

    def result(self) -> dict[str, str]:
        """file name -> why it cannot be graded; waits for the loader."""
        if self._thread is not None:
            self._told.set()  # (no helpers told of: none waits for it)
            self._thread.join()
            self._thread = None
        if self._failure is not None:
            raise self._failure
        return self._errors


def _load_errors(grading: Grading, files: list[str], worker: Worker | None = None) -> dict[str, str]:
    """file name -> why it cannot be graded (missing, fails to import, hangs or crashes on import)."""
    if not Path(grading.folder).is_dir():
        return {f: Phrase("no such folder: {path}", path=grading.folder) for f in files}
    errors: dict[str, str] = {}
    limits = grading.limits
    worker = worker or Worker(grading.plan, None, limits)
    try:
        for file in files:
            deadline = time.monotonic() + limits.timeout_s
            if grading.plan.budget is not None:  # (the submission's deadline too)
                deadline = min(deadline, max(grading.plan.budget.submission_deadline, time.monotonic()))
            try:
                reply = worker.request({"op": "load", "module": file.removesuffix(".py")}, deadline)
            except WorkerTimeout:
                errors[file] = Phrase("{file} did not finish importing within {seconds} s (an endless loop at import?)",
                                    file=file, seconds=format(limits.timeout_s, "g"))
                continue
            except WorkerDied as exc:
                errors[file] = Phrase("{file} crashed the process while importing: {why}", file=file,
                                    why=exc.args[0] if exc.args else str(exc))
                continue
            if "error" in reply:
                errors[file] = reply["error"].get("message")
    finally:
        worker.retire()
    return errors
