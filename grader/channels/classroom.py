"""GitHub Classroom: grade once, and hand the points to the autograding reporter.

`python -m grader classroom exercises` is the grading step of
.github/workflows/classroom.yml: it grades the folder once, writes
results.json (Gradescope's format), appends a Markdown summary to
$GITHUB_STEP_SUMMARY, writes `result=<payload>` to $GITHUB_OUTPUT (the base64
runner result that classroom-resources/autograding-grading-reporter reads: one
test per component, its points as the score) and prints "Points X/Y". Outside
GitHub Actions (those variables unset) it writes results.json and prints the points.
Every output comes from the one Report of that run (grader/results.py).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import sys

from ..i18n import _
from ..inert import actions_log, each_text
from ..results import PASSED, Report


def runner_result(report: Report) -> dict:
    """The reporter's schema: version, status, max_score and one test per component with its points. The
    reporter prints each message in the workflow's log: every text is `actions_log`."""
    tests = []
    for component in report.components:
        failing = [check.name for check in component.checks if check.status != PASSED]
        message = "passed" if not failing else f"failing: {', '.join(failing)}\n\n{component.message}"
        tests.append({"name": component.id, "status": "pass" if not failing else "fail",
                      "score": round(component.score, 2), "max_score": round(component.max_score, 2),
                      "message": message, "line_no": 0, "execution_time": "0s",
                      "test_code": f"python -m grader check {component.id}"})
    status = "pass" if tests and all(t["status"] == "pass" for t in tests) else "fail"
    return each_text({"version": 1, "status": status, "max_score": round(report.max_score, 2), "tests": tests},
                     actions_log)


def payload(result: dict) -> str:
    return base64.b64encode(json.dumps(result).encode()).decode()


def points(result: dict) -> str:
    return f"Points {sum(t['score'] for t in result['tests']):g}/{result['max_score']:g}"


def _append(variable: str, text: str) -> None:
    """Append to the file GitHub Actions names in `variable` (nothing outside Actions)."""
    path = os.environ.get(variable)
    if path:
        with open(path, "a", encoding="utf-8") as file:
            file.write(text)


def grade(folder: str, results: str = "results.json") -> int:
    """The workflow's grading step: one grading run, every output the workflow needs, all from one Report."""
    from ..course import CourseError
    from ..engine.runner import run_checks
    from ..errors import GraderError
    from .render.formats import to_markdown, write_results

    try:
        report = run_checks(folder, own_code=True)  # the student's own repository, in their own CI
    except (CourseError, GraderError) as exc:  # the grader's fault: fail the run, never report 0 points
        print(f"grader error: {exc}", file=sys.stderr)
        return 3
    write_results(report, results, "gradescope")
    result = runner_result(report)
    _append("GITHUB_STEP_SUMMARY", to_markdown(report))
    _append("GITHUB_OUTPUT", f"result={payload(result)}\n")
    print(points(result))
    return 0


def _classroom(args: argparse.Namespace) -> int:
    return grade(args.folder, args.results)


def register(subparsers) -> None:
    parser = subparsers.add_parser("classroom", help=_("GitHub Classroom's grading step (.github/workflows/classroom.yml)"))
    parser.add_argument("folder", nargs="?", default="exercises", metavar="DIR")
    parser.add_argument("--results", default="results.json", metavar="FILE")
    parser.set_defaults(func=_classroom)
