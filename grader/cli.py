"""Command line: `python -m grader COMMAND ...`. It only routes.

Each command group lives in its own module with `register(subparsers)`, which
adds its sub-commands and sets `func` (args -> exit status) on each.
"""
from __future__ import annotations

import argparse
import gc
import importlib
import os
import signal
import sys

from .i18n import LANGUAGES, N_, _, language_from_argv, set_language, ngettext
from .paths import CHECKS_DIR, COURSE_FILE, GRADER, has_course
from .sandbox.confine import PROBE

# Modules adding command groups (each has `register(subparsers)`); add one line per group.
COMMAND_MODULES: list[str] = [
    "grader.channels.commands",  # check, grade
    "grader.channels.package.release",
    "grader.channels.package.gradescope",
    "grader.channels.classroom",
    "grader.channels.batch.command",
    "grader.drills.command",
    "grader.channels.nbgrader.course",
    "grader.channels.nbgrader.study",
    "grader.train.command",
    "grader.show.command",
]


# argparse's own words (its usage line, headings, errors), which it looks up through gettext: extracted here,
# and argparse is given grader/i18n.py's lookup in `main`.
ARGPARSE_TEXTS = (N_("usage: "), N_("positional arguments"), N_("options"), N_("show this help message and exit"),
                  N_("%(prog)s: error: %(message)s\n"), N_("argument %(argument_name)s: %(message)s"),
                  N_("invalid choice: %(value)r (choose from %(choices)s)"), N_("invalid %(type)s value: %(value)r"),
                  N_("the following arguments are required: %s"), N_("unrecognized arguments: %s"),
                  N_("expected one argument"), N_("ambiguous option: %(option)s could match %(matches)s"))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=_("Grade transformer-drills exercises."))
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    _add_lang(parser, argparse.SUPPRESS)
    return parser


def _add_lang(parser: argparse.ArgumentParser, default) -> None:
    """--lang on the top level and, so that it may also come after the verb, on every sub-command."""
    parser.add_argument("--lang", choices=tuple(LANGUAGES), default=default,
                        help=_("language of messages, stubs and bundles (default: from LC_ALL, LC_MESSAGES, "
                               "LANG, else en)"))
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_lang(child, argparse.SUPPRESS)  # absent: the top level's value stands


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: every process it started is ended first


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    PROBE.start()  # which sandbox works here: found on another core while the parser imports torch
    set_language(language_from_argv(argv))  # before the parser, so that --help speaks the language too
    argparse._, argparse.ngettext = _, ngettext  # argparse's module-level gettext lookups, as gettext.install would
    # Importing torch makes some 165,000 objects, and every full collection on the way walks all of them
    # (0.1 s of the import); after it, each one an import or a check sets off would walk them again (0.05 s
    # for pytest's). They live as long as the process: no collection during the import, then none of them
    # in any collection (what grading processes and the zygote fork inherit, frozen).
    gc.disable()
    try:
        args = _parser().parse_args(argv)  # imports every command's module (torch among them)
    except KeyboardInterrupt:
        print(_("interrupted"), file=sys.stderr)
        return 130
    finally:
        gc.freeze()
        gc.enable()
    set_language(getattr(args, "lang", None))
    if not has_course():
        print(_("grader error: {error}").format(error=_(
            "this grader ({grader}) has no course beside it: {course} and {checks} are missing. It grades the "
            "course it ships with: run `python -m grader` from the folder that holds course.yml (a checkout of the "
            "course, or a student release), or install that folder with `pip install -e FOLDER`; `pip install "
            "FOLDER` copies the grader without its course.").format(grader=GRADER, course=COURSE_FILE,
                                                                     checks=CHECKS_DIR)), file=sys.stderr)
        return 3
    signal.signal(signal.SIGTERM, _terminated)
    from .course import CourseError
    from .errors import GraderError

    try:
        return args.func(args)
    except CourseError as exc:
        print(f"course.yml: {exc}", file=sys.stderr)
        return 2
    except GraderError as exc:
        print(_("grader error: {error}").format(error=exc), file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(_("interrupted"), file=sys.stderr)
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
    PROBE.close()
    if "grader.sandbox.reaper" in sys.modules:  # it started processes: wait for every one before leaving
        sys.modules["grader.sandbox.reaper"].shutdown()
    os._exit(code)
