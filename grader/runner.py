"""Run the graded checks against an implementation and score them by course.yml."""
from __future__ import annotations

import io
import math
import os
import time
from contextlib import redirect_stderr, redirect_stdout
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .cache import ResultCache, component_key
from .contract import FILES
from .course import POINT_UNITS, Course, load_course
from .errors import GraderError
from .forked import Forked
from .loader import ImplementationLoadError, Package
from .results import ERROR, FAILED, NOT_STARTED, PASSED, TIMEOUT, CaseResult, CheckResult, ComponentResult, Report
from .target import LoadFailed, NotStarted, StudentError, StudentTimeout
from . import sandbox
from .sandbox import Plan
from .source import private_copy
from .worker import (Limits, Worker, WorkerDied, WorkerTimeout, kill_strays, start_own_zygote, start_zygote,
                     stop_zygote)

if TYPE_CHECKING:
    from .session import CheckSession

ROOT = Path(__file__).resolve().parent.parent
CHECKS_DIR = ROOT / "tests"
MESSAGE_LIMIT = 2000
# Two grading processes where two cores are ours: one waits on its workers half the time.
PROCESSES = min(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1, 2)


class _Collector:
    """A pytest plugin that records each check's outcome as a CaseResult."""

    def __init__(self) -> None:
        self.cases: dict[str, CaseResult] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        marker = item.get_closest_marker("component")
        if marker is None or (report.when != "call" and report.passed):
            return
        check = getattr(item, "originalname", item.name)
        case = CaseResult(item.nodeid, check, marker.args[0], PASSED)
        if report.failed:
            case.status, case.message = _classify(call, report)
        previous = self.cases.get(item.nodeid)
        if previous is None or previous.status == PASSED:
            self.cases[item.nodeid] = case


class _PlainFailures:
    """A pytest plugin: a failing check's report carries its student-facing message, not a formatted traceback.

    Nothing here reads pytest's tracebacks, and formatting one (reading and
    laying out the source of every frame) costs more than many checks take.
    """

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport | None:
        excinfo = call.excinfo
        if excinfo is None or excinfo.errisinstance((pytest.skip.Exception, pytest.xfail.Exception)):
            return None  # pytest's own report: passing and skipping cost nothing to report
        return pytest.TestReport(item.nodeid, item.location, {}, "failed", describe_failure(excinfo.value)[1],
                                 call.when, duration=call.duration, start=call.start, stop=call.stop)


def _classify(call: pytest.CallInfo, report: pytest.TestReport) -> tuple[str, str]:
    if call.excinfo is None:
        return FAILED, str(report.longrepr)[:MESSAGE_LIMIT]
    return describe_failure(call.excinfo.value)


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """A failing check's status and the message a student reads (also plain pytest's, tests/conftest.py).

    Never a grader module or class name: the checks' own messages (AssertionError),
    what student code raised, or how it crashed or hung, as grader/target.py words it.
    """
    if isinstance(exc, NotStarted):
        status = NOT_STARTED
    elif isinstance(exc, (LoadFailed, ImplementationLoadError)):
        status = ERROR
    elif isinstance(exc, StudentTimeout):
        status = TIMEOUT
    elif isinstance(exc, (StudentError, AssertionError)):
        status = FAILED
    elif type(exc).__name__ == "Failed" and "Timeout" in str(exc):  # pytest-timeout's last resort
        return TIMEOUT, "timed out: the code did not finish in time (an endless loop?)"
    else:  # a check's own code raised (say on a value of the wrong type): its type and words, no path
        return FAILED, f"{type(exc).__name__}: {exc}"[:MESSAGE_LIMIT]
    return status, str(exc)[:MESSAGE_LIMIT]


# A helper process starts later than this one: it forks its own zygote, and gets its share only after
# the import check (measured: it ends 0.1-0.2 s after this one on equal shares).
HELPER_START_S = 0.15
# Seconds each component's checks take on the reference (benchmarks/grade_speed.py's machine, one
# process). Only used to share components fairly between grading processes; a stale figure costs speed.
COST = {"kv_cache": 0.73, "pre_ln_block": 0.42, "multi_head_attention": 0.39, "patch_embedding": 0.14,
        "qkv_projection": 0.12, "sinusoidal_encoding": 0.10, "masking": 0.08, "head_splitting": 0.08,
        "scaling": 0.03, "optimizer": 1.0, "cross_entropy": 0.12, "layer_norm": 0.1, "rms_norm": 0.1, "swiglu": 0.1,
        "lr_schedule": 0.05}  # optimizer: torch.optim's first use imports torch._dynamo in the grading process too


def plan_shards(components: list[str], processes: int) -> list[tuple[list[str], int, int]]:
    """Who grades what: per process, (components, index, count): every `count`-th case from `index` on.

    Whole components where there are enough of them (each component's worker
    then starts once); the cases of a lone component are dealt out instead.
    """
    if processes <= 1 or not components:
        return [(components, 0, 1)]
    if len(components) == 1:
        return [(components, index, processes) for index in range(processes)]
    groups: list[list[str]] = [[] for _ in range(processes)]
    load = [0.0] + [HELPER_START_S] * (processes - 1)
    for component in sorted(components, key=lambda c: -COST.get(c, 0.1)):  # longest first, to the least loaded
        least = load.index(min(load))
        groups[least].append(component)
        load[least] += COST.get(component, 0.1)
    return [(group, 0, 1) for group in groups if group]


class _Shard:
    """A pytest plugin that keeps every `count`-th check case, starting at `index`."""

    def __init__(self, index: int, count: int) -> None:
        self.index, self.count = index, count

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items[:] = items[self.index::self.count]


def protection() -> str:
    """The sandbox the workers of this process get (grader/sandbox.py), probed once."""
    return sandbox.choose()


def limits_for(course: Course | None = None, timeout: float | None = None) -> Limits:
    """Each check's time and each worker's memory: course.yml's, or `timeout` seconds per check."""
    course = course or load_course()
    return Limits(timeout_s=timeout or course.timeout, memory_mb=int(course.settings.get("memory_mb", 2048)))


def run_checks(target: str | Path, components: list[str] | None = None, *, course: Course | None = None,
               checks_dir: Path = CHECKS_DIR, isolation: str = "process", timeout: float | None = None,
               cache: ResultCache | None = None, processes: int = PROCESSES, session: CheckSession | None = None) -> Report:
    """Grade the implementation in `target`; `components` limits it to some component ids.

    With process isolation (the default) student code runs only in worker processes,
    and the cases are shared out over `processes` grading processes (forks of
    this one, each with its own workers). With a `cache`, a component whose
    code (its syntax tree, see grader/cache.py) was graded before gets the earlier results.
    With a `session` (grader/session.py, process isolation only) the checks run in
    that open pytest session, in this process.
    """
    course = course or load_course()
    started = time.perf_counter()
    selected = [course.component(c) for c in components] if components else list(course.components)
    limits = limits_for(course, timeout)
    processes = max(processes, 1) if isolation == "process" and session is None else 1
    if isolation != "process":
        return _run(target, str(Path(target).resolve()), selected, limits, isolation, checks_dir, started, cache,
                    processes, session, None)
    start_zygote()
    chosen = protection()
    with private_copy(target, reachable=chosen == sandbox.USERS) as (folder, unreadable), \
            sandbox.hidden_while_grading(chosen):
        plan = Plan.for_copy(chosen, folder)
        return _run(target, folder, selected, limits, isolation, checks_dir, started, cache, processes, session, plan,
                    unreadable)


def _run(target, folder: str, selected, limits: Limits, isolation: str, checks_dir: Path, started: float,
         cache: ResultCache | None, processes: int, session: CheckSession | None, plan: Plan | None,
         unreadable: dict[str, str] | None = None) -> Report:
    settings = f"{limits}|{isolation}"
    keys = {c.id: component_key(folder, c.id, checks_dir, settings) for c in selected} if cache else {}
    cached = {c.id: cases for c in selected if cache and (cases := cache.get(keys[c.id])) is not None}
    to_run = [c for c in selected if c.id not in cached]
    collector = _Collector()
    for cases in cached.values():
        collector.cases.update({case.nodeid: case for case in cases})
    loader = Worker(plan, None, limits) if plan is not None and to_run and Path(folder).is_dir() else None
    if loader is not None:
        loader.spawn()  # the zygote forks it while this process forks the others
    # the other grading processes fork now, before any worker (and the thread draining its output) exists
    helpers = [Forked(_run_shard_in_fork) for _ in range(1, processes)] if to_run else []
    try:
        load_errors = _load_errors(folder, sorted({f for c in to_run for f in FILES[c.id]}), limits, plan, loader)
        load_errors.update({f: why for f, why in (unreadable or {}).items() if f in load_errors})
        runnable = [c for c in to_run if not any(f in load_errors for f in FILES[c.id])]
        if session is not None:
            cases = session.run([c.id for c in runnable], folder, limits, load_errors, plan) if runnable else []
        else:
            cases = _run_shards([c.id for c in runnable], helpers, folder, limits, isolation, checks_dir, load_errors,
                                plan)
        collector.cases.update({case.nodeid: case for case in cases})
    finally:
        if isolation == "process":
            kill_strays()
    if cache:
        for component in runnable:
            cache.put(keys[component.id], [case for case in collector.cases.values() if case.component == component.id])
    results = [_score_component(c, list(collector.cases.values()), load_errors) for c in selected]
    return Report(str(target), results, time.perf_counter() - started,
                  plan.protection if plan is not None else "in-process")


def _run_shards(components: list[str], helpers: list[Forked], folder: str, limits: Limits, isolation: str,
                checks_dir: Path, load_errors: dict[str, str], plan: Plan | None) -> list[CaseResult]:
    """Run the checks of `components`, shared out between this process and the `helpers`."""
    shards = [(_pytest_args([checks_dir / f"test_{c}.py" for c in group], folder, limits, isolation, load_errors, plan),
               index, count) for group, index, count in plan_shards(components, len(helpers) + 1)]
    for helper, shard in zip(helpers, [*shards[1:], *[None] * len(helpers)]):
        helper.send(shard)
    cases = _run_shard(*shards[0]) if components else []
    for helper in helpers:
        cases += helper.result()
    return cases


def _pytest_args(files: list[Path], folder: str, limits: Limits, isolation: str, load_errors: dict[str, str],
                 plan: Plan | None = None) -> list[str]:
    return [*map(str, files), f"--target={folder}", f"--isolation={isolation}", f"--check-timeout={limits.timeout_s}",
            f"--sandbox={plan.protection if plan else 'none'}",
            f"--memory-mb={limits.memory_mb}", *[f"--broken={f}={why}" for f, why in load_errors.items()],
            "-p", "no:cacheprovider", "-q", "--tb=no", "--no-header",
            # only the plugins the checks need, not every one installed (anyio's costs 0.2 s)
            "--disable-plugin-autoload", "-p", "pytest_timeout",
            # Student code never runs in this process, so capturing output, turning warnings into
            # errors and these plugins guard nothing here, and cost time on every check. Every
            # assert in the checks has its own message: none needs rewriting.
            "--capture=no", "--assert=plain", "-p", "no:warnings",
            "-p", "no:unraisableexception", "-p", "no:threadexception", "-p", "no:logging",
            # and no check uses these (registering a plugin costs a millisecond or two per session)
            *[arg for name in ("doctest", "junitxml", "pastebin", "stepwise", "setuponly", "setupplan", "legacypath",
                               "debugging", "tmpdir", "monkeypatch", "recwarn", "python_path", "faulthandler", "skipping",
                               "subtests", "unittest") for arg in ("-p", f"no:{name}")],
            f"--timeout={limits.timeout_s * 3 + 30}",
            "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")]


def _run_shard(args: list[str], index: int, count: int) -> list[CaseResult]:
    collector = _Collector()
    plugins = [collector, _PlainFailures(), *([_Shard(index, count)] if count > 1 else [])]
    with redirect_stdout(io.StringIO()) as out, redirect_stderr(io.StringIO()) as err:
        code = pytest.main(args, plugins=plugins)
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    if code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        raise GraderError(f"the checks could not run (pytest exit {int(code)}):\n{err.getvalue()[-2000:]}"
                          f"{out.getvalue()[-2000:]}")
    return list(collector.cases.values())


def _run_shard_in_fork(shard: tuple[list[str], int, int] | None) -> list[CaseResult]:
    """A forked grading process's part (None: nothing left for it)."""
    if shard is None:
        return []
    start_own_zygote()
    try:
        return _run_shard(*shard)
    finally:
        kill_strays()
        stop_zygote()


def _load_errors(folder: str, files: list[str], limits: Limits, plan: Plan | None,
                 worker: Worker | None = None) -> dict[str, str]:
    """file name -> why it cannot be graded (missing, fails to import, hangs or crashes on import)."""
    if not Path(folder).is_dir():
        return {f: f"no such folder: {folder}" for f in files}
    errors: dict[str, str] = {}
    if plan is None:
        package = Package(folder)
        try:
            for file in files:
                try:
                    package.module(file.removesuffix(".py"))
                except ImplementationLoadError as exc:
                    errors[file] = str(exc)
        finally:
            package.close()
        return errors
    worker = worker or Worker(plan, None, limits)
    try:
        for file in files:
            deadline = time.monotonic() + limits.timeout_s
            try:
                reply = worker.request({"op": "load", "module": file.removesuffix(".py")}, deadline)
            except WorkerTimeout:
                errors[file] = f"{file} did not finish importing within {limits.timeout_s:g} s (an endless loop at import?)"
                continue
            except WorkerDied as exc:
                errors[file] = f"{file} crashed the process while importing: {exc}"
                continue
            if "error" in reply:
                errors[file] = str(reply["error"].get("message"))
    finally:
        worker.kill(how_it_ended=False)
    return errors


def _score_component(component, cases: list[CaseResult], load_errors: dict[str, str]) -> ComponentResult:
    """Score one component by course.yml: each check's share of the points, in whole units.

    A check earns its share times the fraction of its cases that pass; a gated check (see
    Component.gated) also times the fraction of the points its component's core checks earn,
    so code that does not do the work earns nothing from properties that such code keeps.
    """
    broken = [load_errors[f] for f in FILES[component.id] if f in load_errors]
    own = [c for c in cases if c.component == component.id]
    units = component.check_units()
    outcomes: dict[str, tuple[str, int, int, str]] = {}  # name -> status, cases passed, cases run, message
    for name in component.checks:
        runs = [c for c in own if c.check == name]
        if broken:
            outcomes[name] = (ERROR, 0, len(runs), broken[0])
            continue
        if not runs:
            outcomes[name] = (ERROR, 0, 0, "check did not run")
            continue
        passed = sum(c.status == PASSED for c in runs)
        failing = next((c for c in runs if c.status != PASSED), None)
        status = PASSED if failing is None else failing.status
        if failing is not None and status == NOT_STARTED and any(c.status not in (NOT_STARTED, PASSED) for c in runs):
            status = FAILED
        outcomes[name] = (status, passed, len(runs), "" if failing is None else failing.message)

    def earned(name: str) -> Fraction:
        _, passed, total, _ = outcomes[name]
        return units[name] * Fraction(passed, total) if total else Fraction(0)

    core_units = sum(units[name] for name in component.core)
    gate = sum(earned(name) for name in component.core) / core_units if core_units else Fraction(1)
    gated = set(component.gated)
    checks: list[CheckResult] = []
    for name, (status, passed, total, message) in outcomes.items():
        share = earned(name) * (gate if name in gated else 1)
        note = ""
        if name in gated and gate < 1 and passed:
            note = (f"gated: pays once {', '.join(component.core)} pass (they earn {math.floor(gate * 100)}% of "
                    "their points so far)")
        checks.append(CheckResult(name, component.id, status, math.floor(share + Fraction(1, 2)) / POINT_UNITS,
                                  units[name] / POINT_UNITS, passed, total, message, name in component.hidden, note))
    score = round(sum(c.score for c in checks), 6)  # whole units: the rounding only drops float noise
    statuses = {c.status for c in checks}
    if broken:
        status, message = ERROR, broken[0]
    elif statuses == {PASSED}:
        status, message = PASSED, ""
    elif statuses == {NOT_STARTED}:
        status, message = NOT_STARTED, "not started: every check raised NotImplementedError"
    else:
        failing_checks = [c for c in checks if c.status != PASSED]
        first = next((c for c in failing_checks if not c.hidden), failing_checks[0])
        status = TIMEOUT if first.status == TIMEOUT else FAILED
        message = f"{first.name}: {first.student_message}"
    return ComponentResult(component.id, component.title, status, score, component.points, checks, message, component.hint)
