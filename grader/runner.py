"""Run the graded checks against an implementation and score them by course.yml."""
from __future__ import annotations

import io
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from .contract import FILES
from .course import Course, load_course
from .loader import ImplementationLoadError, Package
from .results import ERROR, FAILED, NOT_STARTED, PASSED, TIMEOUT, CaseResult, CheckResult, ComponentResult, Report
from .target import LoadFailed, NotStarted

ROOT = Path(__file__).resolve().parent.parent
CHECKS_DIR = ROOT / "tests"
MESSAGE_LIMIT = 2000


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


def _classify(call: pytest.CallInfo, report: pytest.TestReport) -> tuple[str, str]:
    excinfo = call.excinfo
    if excinfo is None:
        return FAILED, str(report.longrepr)[:MESSAGE_LIMIT]
    if excinfo.errisinstance(NotStarted):
        return NOT_STARTED, f"not started: {excinfo.value.message}"
    if excinfo.errisinstance(LoadFailed):
        return ERROR, excinfo.value.message
    text = excinfo.exconly()
    if "Timeout" in text and excinfo.typename == "Failed":
        return TIMEOUT, "timed out: the code did not finish in time (an endless loop?)"
    text = text.removeprefix("AssertionError: ")
    return FAILED, text[:MESSAGE_LIMIT]


def run_checks(target: str | Path, components: list[str] | None = None, *, course: Course | None = None,
               checks_dir: Path = CHECKS_DIR) -> Report:
    """Grade the implementation in `target`; `components` limits it to some component ids."""
    course = course or load_course()
    started = time.perf_counter()
    selected = [course.component(c) for c in components] if components else list(course.components)
    load_errors = _load_errors(Path(target), {f for c in selected for f in FILES[c.id]})
    files = [str(checks_dir / f"test_{c.id}.py") for c in selected]
    collector = _Collector()
    args = [*files, f"--target={target}", "-p", "no:cacheprovider", "-p", "no:terminal",
            f"--timeout={course.timeout}", "--rootdir", str(ROOT), "-c", str(ROOT / "pyproject.toml")]
    with redirect_stdout(io.StringIO()), redirect_stderr(io.StringIO()):
        pytest.main(args, plugins=[collector])
    results = [_score_component(c, list(collector.cases.values()), load_errors) for c in selected]
    return Report(str(target), results, time.perf_counter() - started)


def _load_errors(target: Path, files: set[str]) -> dict[str, str]:
    """file name -> why it cannot be graded (missing, or fails to import)."""
    errors: dict[str, str] = {}
    try:
        package = Package(target)
    except ImplementationLoadError as exc:
        return {f: str(exc) for f in files}
    try:
        for file in sorted(files):
            try:
                package.module(file.removesuffix(".py"))
            except ImplementationLoadError as exc:
                errors[file] = str(exc)
    finally:
        package.close()
    return errors


def _score_component(component, cases: list[CaseResult], load_errors: dict[str, str]) -> ComponentResult:
    broken = [load_errors[f] for f in FILES[component.id] if f in load_errors]
    own = [c for c in cases if c.component == component.id]
    total_weight = sum(component.checks.values())
    checks: list[CheckResult] = []
    for name, weight in component.checks.items():
        runs = [c for c in own if c.check == name]
        max_score = component.points * weight / total_weight
        if broken:
            checks.append(CheckResult(name, component.id, ERROR, 0.0, max_score, 0, len(runs), broken[0]))
            continue
        if not runs:
            checks.append(CheckResult(name, component.id, ERROR, 0.0, max_score, 0, 0, "check did not run"))
            continue
        passed = sum(c.status == PASSED for c in runs)
        failing = next((c for c in runs if c.status != PASSED), None)
        status = PASSED if failing is None else failing.status
        if failing is not None and status == NOT_STARTED and any(c.status not in (NOT_STARTED, PASSED) for c in runs):
            status = FAILED
        checks.append(CheckResult(name, component.id, status, max_score * passed / len(runs), max_score,
                                  passed, len(runs), "" if failing is None else failing.message))
    score = sum(c.score for c in checks)
    statuses = {c.status for c in checks}
    if broken:
        status, message = ERROR, broken[0]
    elif statuses == {PASSED}:
        status, message = PASSED, ""
    elif statuses == {NOT_STARTED}:
        status, message = NOT_STARTED, "not started: every check raised NotImplementedError"
    else:
        first = next(c for c in checks if c.status != PASSED)
        status = TIMEOUT if first.status == TIMEOUT else FAILED
        message = f"{first.name}: {first.message}"
    return ComponentResult(component.id, component.title, status, score, component.points, checks, message, component.hint)
