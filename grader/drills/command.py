"""`python -m grader drill ...`: timed practice, writing components from memory.

    drill start [COMPONENT ...] [--random N] [--minutes M] [--no-hints] [--force]
    drill check              grade the open drill's components, with the time
    drill hint [COMPONENT]   the next rung of a hint ladder (without a name: the first failing
                             component with hints left)
    drill reveal [COMPONENT] [--give-up]   the reference next to your code
    drill history            past drills per component, best times, a chart

A drill lives in its own folder, `drills/<timestamp>-<components>/` under the
repository (or `--root DIR`, or `$DRILLS_ROOT`): the five contract files with
the drilled components as untouched stubs (the pristine ones of
grader/pristine.py, never the learner's edited exercises/) and working reference
code for everything else, plus `drill.json`, the drill's state (grader/drills/state.py). Finished drills
go to the history file (see grader/drills/history.py).

The current drill is the latest one started. When its `drill.json` cannot be
read, `check`, `hint` and `reveal` stop with an error rather than act on an
older drill; `start --force` moves the unreadable file aside.
"""
from __future__ import annotations

import argparse
import difflib
import os
import random
import sys
import time
from pathlib import Path

from ..contract import COMPONENTS, unknown_components
from .history import ABANDONED, GAVE_UP, PASSED, HistoryFile, format_duration, pick_components, render_history
from ..syntax import definition_source
from .state import MINUTES_PER_COMPONENT, STATE_FILE, STATUS_LABELS, Drill, DrillStateError, current_drill, move_aside
from .workspace import SOLUTIONS, build_workspace, component_names, has_reference, learners_code
from ..pristine import PristineStubsError, pristine_stubs, translate_stubs
from ..paths import ROOT
from ..i18n import _, course_text, language, ngettext


# ---------------------------------------------------------------------------
# Where things are
# ---------------------------------------------------------------------------
def drills_root(args: argparse.Namespace) -> Path:
    """--root, else $DRILLS_ROOT, else drills/ in the repository."""
    root = getattr(args, "root", None) or os.environ.get("DRILLS_ROOT")
    return Path(root).expanduser().resolve() if root else ROOT / "drills"


def _the_drill(args: argparse.Namespace, out: Out, *, open_only: bool = False) -> Drill | int:
    """The drill `check`, `hint` and `reveal` act on (with `open_only`, an open one), else the exit status
    after saying why: none there, or the latest one's state unreadable."""
    root = drills_root(args)
    try:
        drill = current_drill(root, out.warn, open_only=open_only)
    except DrillStateError as exc:
        return _state_error(exc, args, out)
    if drill is not None:
        return drill
    if open_only:
        out.error(_("no open drill; start one with `{command} COMPONENT`").format(command=_command(args, 'start')))
    else:
        out.error(_("no drill under {path}; start one with `{command} COMPONENT`").format(
            path=_display(root), command=_command(args, 'start')))
    return 2


def _state_error(error: DrillStateError, args: argparse.Namespace, out: Out) -> int:
    """Say which state file is broken, what is wrong and how to recover; the exit status."""
    for b in error.broken:
        out.error(f"the state of the latest drill, {_display(b.state_file)}, is unreadable: {b.problem}.\n"
                  f"  No other drill is used in its place. To recover, repair that file, or start a new drill "
                  f"with `{_command(args, 'start')} COMPONENT --force`, which abandons it: the file is moved "
                  f"aside to {STATE_FILE}.corrupt-<time> and your code in {_display(b.folder)} is kept.")
    return 2


def _not_in_drill(component: str, drill: Drill) -> str:
    """The error for a component the drill does not hold, with a "did you mean" when one is close."""
    close = difflib.get_close_matches(component, drill.components, n=1)
    guess = f"; did you mean {close[0]}?" if close else ""
    return f"{component} is not part of this drill ({', '.join(drill.components)}){guess}"


def _display(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _command(args: argparse.Namespace, sub: str) -> str:
    root = f" --root {getattr(args, 'root')}" if getattr(args, "root", None) else ""
    return f"python -m grader drill {sub}{root}"


# ---------------------------------------------------------------------------
# Terminal output
# ---------------------------------------------------------------------------
class Out:
    """rich consoles for results (stdout) and warnings (stderr)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(highlight=False, soft_wrap=not sys.stdout.isatty())
        self.errors = Console(stderr=True, highlight=False, soft_wrap=True)

    def warn(self, message: str) -> None:
        from rich.markup import escape

        label = escape(_("warning:"))
        self.errors.print(f"[yellow]{label}[/yellow] {escape(message)}", markup=True)

    def error(self, message: str) -> None:
        from rich.markup import escape

        label = escape(_("error:"))
        self.errors.print(f"[red]{label}[/red] {escape(message)}", markup=True)

    def print(self, *objects, **kwargs) -> None:
        self.console.print(*objects, **kwargs)


def _warn_history(history: HistoryFile, out: Out) -> None:
    for warning in history.warnings:
        out.warn(warning)
    history.warnings.clear()


def _history(out: Out) -> tuple[HistoryFile, list[dict]]:
    """The history and its drills, read only (what was skipped is said on stderr)."""
    history = HistoryFile()
    drills = history.load()
    _warn_history(history, out)
    return history, drills


def _finish(drill: Drill, status: str, out: Out, history: HistoryFile | None = None) -> None:
    """End the drill and record it; what the history's repair did is said on stderr."""
    history = history or HistoryFile()
    drill.finish(status, history)
    _warn_history(history, out)


def _time_line(drill: Drill) -> str:
    elapsed, limit = drill.elapsed(), drill.minutes * 60
    if not drill.is_open:
        return _("elapsed {elapsed} (drill {status})").format(elapsed=format_duration(elapsed),
                                                              status=_(STATUS_LABELS[drill.status]))
    if elapsed > limit:
        return _("elapsed {elapsed}: time is up ({limit}, over by {over})").format(
            elapsed=format_duration(elapsed), limit=format_duration(limit), over=format_duration(elapsed - limit))
    return _("elapsed {elapsed}, remaining {left} of {limit}").format(
        elapsed=format_duration(elapsed), left=format_duration(limit - elapsed), limit=format_duration(limit))


# ---------------------------------------------------------------------------
# start
# ---------------------------------------------------------------------------
def _new_workspace(root: Path, components: list[str]) -> Path:
    """drills/<timestamp>-<components>, never an existing folder."""
    base = f"{time.strftime('%Y%m%d-%H%M%S')}-{'-'.join(components)}"
    path, n = root / base, 2
    while path.exists():
        path, n = root / f"{base}-{n}", n + 1
    return path


def _choose(args: argparse.Namespace, drills: list[dict], out: Out) -> list[str] | None:
    error = unknown_components(args.components)
    if error:
        out.error(error)
        return None
    if args.components and args.random:
        out.error("name components or use --random N, not both")
        return None
    if args.components:
        return list(dict.fromkeys(args.components))
    n = args.random or 1
    if not 1 <= n <= len(COMPONENTS):
        out.error(f"--random takes 1 to {len(COMPONENTS)}")
        return None
    return pick_components(n, drills, random.Random(args.seed))


def _start(args: argparse.Namespace) -> int:
    out, root = Out(), drills_root(args)
    history, past = _history(out)
    components = _choose(args, past, out)
    if components is None:
        return 2
    if args.minutes is not None and args.minutes <= 0:
        out.error("--minutes must be positive")
        return 2
    try:
        stubs = translate_stubs(pristine_stubs(), language(), out.warn)
    except PristineStubsError as exc:
        out.error(str(exc))
        return 2
    try:
        previous = current_drill(root, out.warn, open_only=True)
    except DrillStateError as exc:
        if not args.force:
            for b in exc.broken:
                out.error(f"the state of the latest drill, {_display(b.state_file)}, is unreadable: {b.problem}; "
                          f"that drill may still be open.\n  To abandon it and start this one, add --force to this "
                          f"command: the file is moved aside to {STATE_FILE}.corrupt-<time> and the folder is kept.")
            return 1
        try:
            for b in exc.broken:
                aside = move_aside(b)
                out.print(f"Abandoned the drill in {_display(b.folder)}, whose {STATE_FILE} is unreadable "
                          f"({b.problem}): the file is moved aside to {aside.name}, the folder is kept, and it is "
                          "not in the history (its components and times are unknown).")
            previous = current_drill(root, out.warn, open_only=True)
        except (OSError, DrillStateError) as again:
            out.error(f"could not move the unreadable drill state aside: {again}")
            return 2
    if previous is not None:
        if not args.force:
            out.error(f"a drill is still open: {previous.id} ({', '.join(previous.components)}), "
                      f"{format_duration(previous.elapsed())} in.\n"
                      f"  Finish it: `{_command(args, 'check')}` until it passes, or `{_command(args, 'reveal')} --give-up`;\n"
                      f"  or abandon it (its folder is kept): add --force to this command.")
            return 1
        _finish(previous, ABANDONED, out, history)
        out.print(f"Abandoned the open drill {previous.id}; its folder is kept: {_display(previous.workspace)}")
    workspace = _new_workspace(root, components)
    working = build_workspace(workspace, components, stubs=stubs, solutions=SOLUTIONS, interview=args.no_hints)
    drill = Drill(workspace.name, components, time.time(), args.minutes or MINUTES_PER_COMPONENT * len(components),
                  args.no_hints, working, workspace=workspace)
    drill.save()
    _print_started(drill, args, out)
    return 0


def _print_started(drill: Drill, args: argparse.Namespace, out: Out) -> None:
    from rich.text import Text

    out.print(Text(_("Drill started: {components}").format(components=", ".join(drill.components)), style="bold"))
    out.print(_("Workspace: {path}").format(path=_display(drill.workspace)))
    out.print(_("Write from memory:"))
    for component in drill.components:
        for module, names in component_names(component).items():
            out.print(f"  {component}: {_display(drill.workspace / (module + '.py'))}: {', '.join(names)}")
    if drill.working_code:
        out.print(_("Everything else in the workspace is working reference code, so your code runs in context."))
    else:
        out.print(_("This is a student release without the reference: the other components are stubs too "
                    "(each component is still graded on its own, with trusted stand-ins for the others)."))
    mode = _("interview mode: the stubs' worded steps are hidden, and checks show only pass/fail and no hints "
             "until the drill ends") if drill.interview \
        else _("hints: `{command}`").format(command=_command(args, 'hint'))
    out.print(_("Time: {duration} from now; {mode}.").format(duration=format_duration(drill.minutes * 60), mode=mode))
    out.print(_("Check your work: `{command}`").format(command=_command(args, 'check')))


# ---------------------------------------------------------------------------
# check
# ---------------------------------------------------------------------------
def _check(args: argparse.Namespace) -> int:
    from ..channels.render.formats import print_terminal
    from ..results import PASSED as CHECK_PASSED
    from ..engine.runner import run_checks

    out = Out()
    drill = _the_drill(args, out)
    if not isinstance(drill, Drill):
        return drill
    now = time.time()  # the candidate's time stops when they ask for the check, not when grading ends
    report = run_checks(drill.workspace, drill.components, timeout=args.timeout, own_code=True)
    passed = {c.id for c in report.components if c.status == CHECK_PASSED}
    finished_now = False
    if drill.is_open:
        drill.checks += 1
        drill.last_status = {c.id: c.status for c in report.components}
        for component in passed:
            drill.passed_at.setdefault(component, round(drill.elapsed(now), 1))
        drill.save()
        if passed == set(drill.components):
            _finish(drill, PASSED, out)
            finished_now = True
    else:
        out.print(_("(drill {id} is {status}; this check is not recorded)").format(
            id=drill.id, status=_(STATUS_LABELS[drill.status])))
    if drill.details_hidden(now):
        _print_pass_fail(report, out)
    else:
        print_terminal(report, verbose=True, file=sys.stdout)
    out.print(_time_line(drill))
    if finished_now:
        hints = sum(drill.hints_used.values())
        out.print(ngettext("Passed in {duration} with {hints} hint. `{reveal}` shows the reference next to your "
                           "code; `{history}` shows your progress.",
                           "Passed in {duration} with {hints} hints. `{reveal}` shows the reference next to your "
                           "code; `{history}` shows your progress.", hints).format(
            duration=format_duration(max(drill.passed_at.values())), hints=hints,
            reveal=_command(args, 'reveal'), history=_command(args, 'history')))
    return 0 if passed == set(drill.components) else 1


def _print_pass_fail(report, out: Out) -> None:
    """Interview mode: one line per check, pass or fail, nothing else."""
    from rich.text import Text

    from ..results import PASSED as CHECK_PASSED

    word = {True: _("PASS"), False: _("FAIL")}
    for component in report.components:
        out.print(Text(f"{component.id}: {word[component.status == CHECK_PASSED]}", style="bold"))
        for check in component.checks:
            ok = check.status == CHECK_PASSED
            out.print(Text(f"  {word[ok]}  {check.name}", style="green" if ok else "red"))
    out.print(_("(interview mode: details and hints are hidden until the drill ends)"))


# ---------------------------------------------------------------------------
# hint
# ---------------------------------------------------------------------------
def _hint(args: argparse.Namespace) -> int:
    from ..course import load_course

    out = Out()
    drill = _the_drill(args, out, open_only=True)
    if not isinstance(drill, Drill):
        return drill
    if drill.details_hidden():
        out.error(_("interview mode: no hints until the drill ends (a pass, time up, or `drill reveal --give-up`)"))
        return 1
    if args.component and args.component not in drill.components:
        out.error(_not_in_drill(args.component, drill))
        return 2
    course = load_course()
    failing = [c for c in drill.components if drill.last_status.get(c) != PASSED]
    if not args.component and not failing:
        out.print(_("Every component of this drill passed its last check: no hint needed."))
        return 0
    # without a name: the first failing component that still has a hint left
    left = [c for c in failing if drill.hints_used.get(c, 0) < len(course.component(c).hint_ladder)]
    component = args.component or (left[0] if left else failing[0])
    ladder = course.component(component).hint_ladder
    used = drill.hints_used.get(component, 0)
    if used >= len(ladder):
        which = component if args.component else _("any failing component ({components})").format(
            components=", ".join(failing))
        used_up = _("all {count} hints used").format(count=len(ladder)) if args.component else _("all their hints used")
        out.print(_("No more hints for {which}: {used_up}. `{command} --give-up` shows the reference.").format(
            which=which, used_up=used_up, command=_command(args, 'reveal')))
        return 1
    drill.hints_used[component] = used + 1
    drill.save()
    out.print(_("{component}, hint {number}/{count}: {hint}").format(
        component=component, number=used + 1, count=len(ladder), hint=course_text(component, ladder[used])))
    return 0


# ---------------------------------------------------------------------------
# reveal
# ---------------------------------------------------------------------------
def _reveal(args: argparse.Namespace) -> int:
    out = Out()
    drill = _the_drill(args, out)
    if not isinstance(drill, Drill):
        return drill
    if args.component and args.component not in drill.components:
        out.error(_not_in_drill(args.component, drill))
        return 2
    if args.give_up and drill.is_open:
        _finish(drill, GAVE_UP, out)
        out.print(_("Gave up drill {id} after {duration}; it is in the history.").format(
            id=drill.id, duration=format_duration(drill.elapsed())))
    components = [args.component] if args.component else drill.components
    allowed = [c for c in components if c in drill.passed_at or drill.status == GAVE_UP]
    refused = [c for c in components if c not in allowed]
    if refused:
        out.error(_("{components} has not passed yet: the reference comes after a pass, or give up with "
                    "`{command} --give-up`").format(components=", ".join(refused), command=_command(args, 'reveal')))
        if not allowed:
            return 1
    if not has_reference(SOLUTIONS):
        out.print(_("The reference is not included in this release (no solutions/ folder); your code is in "
                    "{path}.").format(path=_display(drill.workspace)))
        return 0
    for component in allowed:
        for module, names in component_names(component).items():
            for name in names:
                _print_side_by_side(component, module, name, drill.workspace, out)
    return 0 if not refused else 1


def _print_side_by_side(component: str, module: str, name: str, workspace: Path, out: Out) -> None:
    """The reference's and the candidate's source of one name, side by side when the terminal is wide."""
    from rich.columns import Columns
    from rich.panel import Panel
    from rich.syntax import Syntax

    reference = definition_source((SOLUTIONS / f"{module}.py").read_text(), name) or _("(not in the reference)")
    try:
        yours = learners_code((workspace / f"{module}.py").read_text(), name)
    except (OSError, SyntaxError, ValueError) as exc:
        yours = _("(could not read your {file}: {error})").format(file=f"{module}.py", error=exc)
    if yours is None:
        yours = _("(not found in your {file})").format(file=f"{module}.py")
    elif not yours:
        yours = _("(nothing written: your {name} still holds only the stub's docstring and raise "
                  "NotImplementedError)").format(name=name)
    sides = ((_("reference: {name}"), reference), (_("yours: {name}"), yours))
    panels = [Panel(Syntax(text, "python", theme="ansi_dark", word_wrap=True),
                    title=title.format(name=f"{module}.{name}"), title_align="left") for title, text in sides]
    out.print(f"\n[bold]{component}[/bold]: {module}.{name}", markup=True)
    if out.console.width >= 160:
        out.print(Columns(panels, equal=True, expand=True))
    else:
        for panel in panels:
            out.print(panel)


# ---------------------------------------------------------------------------
# history
# ---------------------------------------------------------------------------
def _show_history(args: argparse.Namespace) -> int:
    out = Out()
    history, drills = _history(out)
    out.print(_("Drill history: {path}").format(path=history.path))
    render_history(drills, out.console)
    return 0


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------
def register(subparsers) -> None:
    """Add `drill` and its sub-commands to the grader's command line."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", metavar="DIR",
                        help=_("folder holding the drill workspaces (default: $DRILLS_ROOT, else drills/ in the repository)"))
    drill = subparsers.add_parser("drill", help=_("timed practice: write components from memory"),
                                  description=_("Timed practice for interviews. History: $DRILLS_HOME/history.json "
                                              "(default ~/.transformer-drills/history.json)."))
    sub = drill.add_subparsers(dest="drill_command", required=True)

    start = sub.add_parser("start", parents=[common], help=_("start a drill in a fresh workspace"))
    start.add_argument("components", nargs="*", metavar="COMPONENT", help=_("any of: {components}").format(components=", ".join(COMPONENTS)))
    start.add_argument("--random", type=int, metavar="N", help=_("pick N components, the weakest and least recent first"))
    start.add_argument("--seed", type=int, help=_("seed for --random (for repeatable picks)"))
    start.add_argument("--minutes", type=float, metavar="M",
                       help=_("time limit (default {minutes:g} per component)").format(minutes=MINUTES_PER_COMPONENT))
    start.add_argument("--no-hints", action="store_true",
                       help=_("interview mode: only pass/fail per check, no hints, until the drill ends"))
    start.add_argument("--force", action="store_true", help=_("abandon a drill that is still open"))
    start.set_defaults(func=_start)

    check = sub.add_parser("check", parents=[common], help=_("grade the drill's components, with the time"))
    check.add_argument("--timeout", type=float, metavar="S", help=_("seconds per check (default: course.yml)"))
    check.set_defaults(func=_check)

    hint = sub.add_parser("hint", parents=[common], help=_("the next hint for a failing component"))
    hint.add_argument("component", nargs="?", metavar="COMPONENT")
    hint.set_defaults(func=_hint)

    reveal = sub.add_parser("reveal", parents=[common], help=_("the reference next to your code (after a pass)"))
    reveal.add_argument("component", nargs="?", metavar="COMPONENT")
    reveal.add_argument("--give-up", action="store_true", help=_("end the drill unpassed and show the reference"))
    reveal.set_defaults(func=_reveal)

    history = sub.add_parser("history", parents=[common], help=_("past drills per component and a chart of times"))
    history.set_defaults(func=_show_history)
