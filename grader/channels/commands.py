"""`python -m grader check` (a table in the terminal; with `--watch` one on every save, see watch.py) and
`python -m grader grade DIR --results FILE`."""
from __future__ import annotations

import argparse
import sys

from ..contract import COMPONENTS, unknown_components
from ..paths import EXERCISES
from .render.formats import FORMATTERS, WHICH_FIGURES
from ..i18n import _

FORMATS = tuple(FORMATTERS)


def register(sub) -> None:
    check = sub.add_parser("check", help=_("grade exercises/ and print a table per component"))
    check.add_argument("components", nargs="*", metavar="COMPONENT", help=_("any of: {components}").format(components=", ".join(COMPONENTS)))
    check.add_argument("--target", default=str(EXERCISES), help=_("folder to grade (default: exercises/)"))
    check.add_argument("-v", "--verbose", action="store_true", help=_("list every check"))
    check.add_argument("--hints", action="store_true", help=_("show the hint of each component not passed (failing or not started)"))
    check.add_argument("--json", action="store_true", help=_("print the report as JSON"))
    check.add_argument("--fail-under", type=float, metavar="N", help=_("exit 1 when the score is below N"))
    check.add_argument("--timeout", type=float, metavar="S", help=_("seconds per check (default: course.yml)"))
    add_accept_protection(check)
    check.add_argument("--watch", action="store_true",
                       help=_("stay running: grade again and print a fresh table whenever you save a file of these "
                              "components"))
    check.set_defaults(func=_check)
    grade = sub.add_parser("grade", help=_("grade a submission folder and write results.json"))
    grade.add_argument("submission", metavar="DIR")
    grade.add_argument("--results", required=True, metavar="FILE", help=_("where to write the results"))
    grade.add_argument("--format", choices=FORMATS, default="gradescope",
                       help=_("gradescope (results.json, default), json, junit (XML), markdown or html (one page, "
                              "with pictures)"))
    grade.add_argument("--also", action="append", default=[], metavar="FORMAT=FILE", type=_also,
                       help=_("write the same grade in another format too (repeatable; {formats})").format(formats=", ".join(FORMATS)))
    grade.add_argument("--figures", choices=WHICH_FIGURES, default="failing",
                       help=_("whose figures an html page embeds: the failing components' that a picture shows "
                              "(default), every component's that has figures, or none"))
    grade.add_argument("--timeout", type=float, metavar="S", help=_("seconds per check (default: course.yml)"))
    add_accept_protection(grade)
    grade.set_defaults(func=_grade)


class _Accept(argparse.Action):
    def __call__(self, parser, namespace, value, option_string=None) -> None:
        import os

        from ..sandbox.confine import ACCEPT_VARIABLE

        os.environ[ACCEPT_VARIABLE] = value  # (job processes of grade-all inherit it)
        setattr(namespace, self.dest, value)


def add_accept_protection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--accept-protection", choices=("users", "none"), action=_Accept, metavar="{users,none}",
                        help="grade even where only this weaker protection of student code works (refused "
                             "otherwise; see docs/instructors.md)")  # (not in the catalogue yet: English)


def _also(text: str) -> tuple[str, str]:
    fmt, sep, path = text.partition("=")
    if not sep or not path or fmt not in FORMATS:
        raise argparse.ArgumentTypeError(f"expected FORMAT=FILE with FORMAT one of {', '.join(FORMATS)}, got {text!r}")
    return fmt, path


def _check(args: argparse.Namespace) -> int:
    from .render.formats import print_terminal, to_json
    from ..engine.runner import run_checks

    error = unknown_components(args.components)
    if args.watch and (args.json or args.fail_under is not None):
        error = _("--watch prints a table on every save; it takes neither --json nor --fail-under")
    if error:
        print(error, file=sys.stderr)
        return 2
    if args.watch:
        from .watch import watch

        return watch(args.target, args.components, verbose=args.verbose, hints=args.hints, timeout=args.timeout)
    report = run_checks(args.target, args.components or None, timeout=args.timeout, own_code=True)
    if args.json:
        print(to_json(report))
    else:
        print_terminal(report, verbose=args.verbose, hints=args.hints)
    if args.fail_under is not None and report.score < args.fail_under:
        return 1
    return 0


def _grade(args: argparse.Namespace) -> int:
    from .render.formats import format_points, write_results
    from ..engine.runner import run_checks

    report = run_checks(args.submission, timeout=args.timeout)
    outputs = [(args.format, args.results), *args.also]  # one grading, every format from the same report
    for fmt, path in outputs:
        write_results(report, path, fmt, figures=args.figures)
    print(_("{points} points; results written to {paths}").format(
        points=format_points(report.score, report.max_score), paths=", ".join(path for _fmt, path in outputs)))
    return 0
