"""Command line: `python -m grader COMMAND ...`. It only routes.

Each command group lives in its own module with `register(subparsers)`, which
adds its sub-commands and sets `func` (args -> exit status) on each.
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

# Modules adding command groups (each has `register(subparsers)`); add one line per group.
COMMAND_MODULES: list[str] = [
    "grader.channels.commands",  # check, grade
    "grader.channels.release",
    "grader.channels.gradescope",
    "grader.channels.classroom",
    "grader.channels.batch.command",
    "grader.drills.command",
    "grader.channels.nbgrader.course",
    "grader.train.command",
    "grader.show.command",
]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description="Grade transformer-drills exercises.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt  # SIGTERM ends a run as Ctrl-C does: every process it started is ended first


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
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
    if "grader.sandbox.reaper" in sys.modules:  # it started processes: wait for every one before leaving
        sys.modules["grader.sandbox.reaper"].shutdown()
    os._exit(code)
