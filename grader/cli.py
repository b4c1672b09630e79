"""Command line: `python -m grader check [COMPONENT ...]`, `python -m grader grade DIR --results FILE`, ...

Each command group lives in its own module with `register(subparsers)`, which
adds its sub-commands and sets `func` (args -> exit status) on each.
"""
from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from pathlib import Path

from .contract import COMPONENTS

ROOT = Path(__file__).resolve().parent.parent

# Modules adding command groups (each has `register(subparsers)`); add one line per group.
COMMAND_MODULES: list[str] = [
    "grader.release",
    "grader.gradescope",
    "grader.batch",
    "grader.drill",
    "grader.nbgrader_course",
    "grader.train",
]

FORMATS = ("gradescope", "json", "junit", "markdown")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade transformer-drills exercises.")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="grade exercises/ and print a table per component")
    check.add_argument("components", nargs="*", metavar="COMPONENT", help=f"any of: {', '.join(COMPONENTS)}")
    check.add_argument("--target", default=str(ROOT / "exercises"), help="folder to grade (default: exercises/)")
    check.add_argument("-v", "--verbose", action="store_true", help="list every check")
    check.add_argument("--hints", action="store_true", help="show the hint of each component not passed (failing or not started)")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.add_argument("--fail-under", type=float, metavar="N", help="exit 1 when the score is below N")
    check.add_argument("--timeout", type=float, metavar="S", help="seconds per check (default: course.yml)")
    check.set_defaults(func=_check)
    grade = sub.add_parser("grade", help="grade a submission folder and write results.json")
    grade.add_argument("submission", metavar="DIR")
    grade.add_argument("--results", required=True, metavar="FILE", help="where to write the results")
    grade.add_argument("--format", choices=FORMATS, default="gradescope",
                       help="gradescope (results.json, default), json, junit (XML) or markdown")
    grade.add_argument("--timeout", type=float, metavar="S", help="seconds per check (default: course.yml)")
    grade.set_defaults(func=_grade)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def unknown_components(names: list[str], known: tuple[str, ...] | list[str] = COMPONENTS) -> str | None:
    """The error for the names that are not components (None when all are), with a "did you mean" for each."""
    unknown = [n for n in names if n not in known]
    if not unknown:
        return None
    parts = []
    for name in unknown:
        close = difflib.get_close_matches(name, known, n=1)
        parts.append(f"{name} (did you mean {close[0]}?)" if close else name)
    return f"unknown component(s): {', '.join(parts)}; choose from {', '.join(known)}"


def _check(args: argparse.Namespace) -> int:
    from .report import print_terminal, to_json
    from .runner import run_checks

    error = unknown_components(args.components)
    if error:
        print(error, file=sys.stderr)
        return 2
    report = run_checks(args.target, args.components or None, timeout=args.timeout)
    if args.json:
        print(to_json(report))
    else:
        print_terminal(report, verbose=args.verbose, hints=args.hints)
    if args.fail_under is not None and report.score < args.fail_under:
        return 1
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .report import format_points, write_results
    from .runner import run_checks

    report = run_checks(args.submission, timeout=args.timeout)
    write_results(report, args.results, args.format)
    print(f"{format_points(report.score, report.max_score)} points; results written to {args.results}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from .course import CourseError
    from .errors import GraderError

    try:
        return args.func(args)
    except CourseError as exc:
        print(f"course.yml: {exc}", file=sys.stderr)
        return 2
    except GraderError as exc:
        print(f"grader error: {exc}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def run() -> None:
    """The command line: `main`, then leave without tearing the interpreter down.

    Tearing down torch takes half a second, and there is nothing to tear down:
    results are written and closed. Every process the grader started (the
    zygote, workers, what student code left running) is ended and waited for
    first, so none is left behind or handed to another parent.
    """
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if "grader.worker" in sys.modules:  # it started processes: wait for every one before leaving
        sys.modules["grader.worker"].shutdown()
    os._exit(code)
