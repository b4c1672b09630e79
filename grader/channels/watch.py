"""`python -m grader check COMPONENT... --watch`: a fresh table on every save, from one warm grading process.

torch, pytest and the components' checks are loaded once, in one pytest
session (grader/engine/session.py); each grading then runs as `check` runs
one: a fresh private copy of the folder, fresh confined workers.

The watcher (watchfiles) only wakes the loop up. What decides a grading is
the state of the files each component depends on (`watched_files`: bytes and
stat), compared with the state its last grading started from. So a file of
another component never re-grades it; a save during a grading makes that
grading's table stale (it is not shown) and the newer files are graded as
soon as it ends; a burst of saves is graded once, after it.
"""
from __future__ import annotations

import hashlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, TextIO

from ..contract import FILES
from ..errors import GraderError
from ..i18n import _
from ..inert import visible
from ..results import ComponentResult
from ..source import SUBMISSION_FILES, UnreadableFile, read_file

if TYPE_CHECKING:
    from ..engine.session import CheckSession

STEP_MS = 10  # a burst of file events ends after this long without a new one: a save is seen within two steps
DEBOUNCE_MS = 300  # the longest a burst is gathered before it is graded
RECHECK_MS = 1000  # how often the watcher makes sure the folder it watches is still there (and the same one)

State = dict[str, object]  # file name -> what it is now (None: missing)


def watched_files(folder: str | Path, components: list[str]) -> list[str]:
    """The exercise files whose change re-grades `components`.

    Their files (contract.FILES), the files that hold their graded code and any
    sibling those import helpers from (engine/cache.py `modules_read`), and
    where a stand-in is not shipped (a student release), the file of each name
    that the student's own code then stands in for.
    """
    from ..engine.cache import modules_read
    from ..sandbox import standins

    modules: set[str] = set()
    for component in components:
        modules.update(f.removesuffix(".py") for f in FILES[component])
        modules.update(modules_read(folder, component))
        modules.update(standins.module_of(name) for name, piece in standins.PIECES.items()
                       if component not in standins.owners(name) and not standins.shipped(piece))
    return sorted(f"{m}.py" for m in modules)


def file_state(folder: Path, files: list[str]) -> State:
    """What each file is now: its identity and times, and a hash of its bytes (the times alone may not move
    between two quick saves); None for a missing file, the reason for one that cannot be read."""
    state: State = {}
    for name in files:
        path = folder / name
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            state[name] = None
            continue
        except OSError as exc:
            state[name] = exc.strerror
            continue
        try:
            content: object = hashlib.sha256(read_file(path)).hexdigest()
        except UnreadableFile as exc:
            content = str(exc)
        state[name] = (info.st_ino, info.st_mode, info.st_size, info.st_mtime_ns, content)
    return state


def _what_changed(graded: dict[str, State], now: dict[str, State], components: list[str]) -> str:
    """The header of a grading: the files saved, created or deleted since `components` were graded."""
    if not graded:
        return _("first grading")
    words: dict[str, str] = {}
    for component in components:
        before, after = graded.get(component, {}), now[component]
        for name in sorted(set(before) | set(after)):
            old, new = before.get(name), after.get(name)
            if old != new:
                words[name] = (_("{file} deleted") if new is None else _("{file} created") if old is None
                               else _("{file} saved")).format(file=name)
    return ", ".join(words[name] for name in sorted(words)) or _("saved")


def _identity(folder: Path) -> tuple[int, int] | None:
    try:
        info = os.stat(folder)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


class Watcher:
    """The gradings to do (`tasks`, the first at once) and how each is done and shown (`grade`).

    Each component is graded again only when its own files changed; the table
    shows every watched component, the others with their latest results.
    """

    def __init__(self, target: str, components: list[str], *, verbose: bool = False, hints: bool = False,
                 timeout: float | None = None, out: TextIO | None = None) -> None:
        from ..course import load_course

        self.target, self.folder, self.components = target, Path(target), components
        self.verbose, self.hints, self.timeout = verbose, hints, timeout
        self.out = out or sys.stdout
        self.course = load_course()
        self.graded: dict[str, State] = {}  # component -> its files as its latest grading found them
        self.results: dict[str, ComponentResult] = {}
        self._events: Iterator | None = None  # watchfiles' generator, for the folder `_watching` names
        self._watching: tuple[int, int] | None = None
        self._warmed = False
        self.grading = False
        self.stopping = False  # Ctrl-C came: end before the next grading

    def interrupted(self, signum: int, frame: object) -> None:
        """The handler of Ctrl-C (and SIGTERM): end now while waiting; during a grading, once it ends.

        Ended mid-grading, this process could be stopped half-way through a talk with
        its zygote. The flag also outlives a KeyboardInterrupt that lands where
        Python ignores exceptions (an at-fork hook, a finalizer). A second Ctrl-C
        during the same grading ends it at once.
        """
        again, self.stopping = self.stopping, True
        if not self.grading or again:
            raise KeyboardInterrupt

    def files(self, components: list[str] | None = None) -> list[str]:
        return watched_files(self.folder, components or self.components)

    def now(self) -> dict[str, State]:
        """Each component's files as they are now."""
        files = {c: self.files([c]) for c in self.components}
        state = file_state(self.folder, sorted({f for names in files.values() for f in names}))
        return {c: {name: state[name] for name in names} for c, names in files.items()}

    def tasks(self) -> Iterator[tuple[str, list[str]]]:
        """(what changed, the components to grade), each time some component's files differ from its last grading."""
        while True:
            if self.stopping:
                raise KeyboardInterrupt
            state = self.now()
            changed = [c for c in self.components if state[c] != self.graded.get(c)]
            if changed:
                yield _what_changed(self.graded, state, changed), changed
                continue
            while not self._wait():
                if self.stopping:
                    raise KeyboardInterrupt

    def _wait(self) -> bool:
        """Until a file event (True), else RECHECK_MS (False). A folder that was removed or replaced is watched
        afresh (True: the files are compared again right after the watcher starts, so no save is missed)."""
        import watchfiles

        identity = _identity(self.folder)
        if self._events is not None and identity != self._watching:
            self._events.close()
            self._events = None
        if self._events is None:
            if identity is None:  # no folder (yet): look again later
                time.sleep(RECHECK_MS / 1000)
                return False
            self._events = watchfiles.watch(self.folder, watch_filter=lambda change, path: Path(path).name in
                                            SUBMISSION_FILES, debounce=DEBOUNCE_MS, step=STEP_MS,
                                            rust_timeout=RECHECK_MS, yield_on_timeout=True, recursive=False)
            self._watching = identity
            return True
        return bool(next(self._events))

    def grade(self, task: tuple[str, list[str]], session: CheckSession) -> None:
        """Grade `components` in the folder as it is now, in `session`, and show the whole table, unless their
        files changed meanwhile (that table would be stale: they are graded again at once)."""
        from ..engine.runner import run_checks
        from ..sandbox.zygote import ZYGOTE

        reason, components = task
        state = self.now()
        self.graded.update({c: state[c] for c in components})
        self.grading = True
        try:
            report = run_checks(self.target, components, course=self.course, timeout=self.timeout, session=session,
                                 own_code=True)
        except Exception as exc:  # noqa: BLE001 - a grader failure is shown; the next save tries again
            if self.stopping:
                return  # Ctrl-C: its signal may have ended the zygote under this grading
            self._header(_("{reason}: the grader failed").format(reason=reason))
            print(visible(_("grader error: {error}").format(
                error=exc if isinstance(exc, GraderError) else f"{type(exc).__name__}: {exc}")), file=self.out)
            self._footer()
            return
        finally:
            self.grading = False
        if self.stopping:
            return
        self.results.update({c.id: c for c in report.components})
        now = self.now()
        if any(now[c] != state[c] for c in components):
            return
        if components == self.components:
            graded = _("graded in {seconds:.2f} s")
        elif len(components) <= 3:
            graded = _("graded {components} in {seconds:.2f} s")
        else:
            graded = _("graded {count} components in {seconds:.2f} s")
        graded = graded.format(components=", ".join(components), count=len(components), seconds=report.duration_s)
        self._header(f"{reason} · {graded}")
        from .render.formats import print_terminal

        report.components = [self.results[c] for c in self.components]
        print_terminal(report, verbose=self.verbose, hints=self.hints, file=self.out)
        self._footer()
        if ZYGOTE.meta_loaded and not self._warmed:
            # this code computes on the meta device: let the next workers find torch's set-up of it done
            ZYGOTE.warm()
            self._warmed = True

    def _console(self):
        from rich.console import Console

        tty = self.out.isatty()
        return Console(file=self.out, highlight=False, markup=False, emoji=False, no_color=not tty,
                       width=None if tty else 79)  # the folder's name is shown as it is (`visible`), never markup

    def _header(self, text: str) -> None:
        console = self._console()
        if self.out.isatty():
            console.clear()
        console.rule(f"{time.strftime('%H:%M:%S')} · {text}", style="dim")

    def _footer(self) -> None:
        self._console().print("\n" + _("watching {files} in {folder} (Ctrl-C ends)").format(
            files=visible(", ".join(self.files())), folder=visible(str(self.target))), style="dim")
        self.out.flush()


def watch(target: str, components: list[str], *, verbose: bool = False, hints: bool = False,
          timeout: float | None = None) -> int:
    """Grade `components` (all when empty) in `target` now and after every save, until Ctrl-C."""
    try:
        import watchfiles  # noqa: F401 - here, so that a missing package is said before anything starts
    except ImportError:
        raise GraderError(_("watch mode needs the watchfiles package (`pip install -e .` installs it)")) from None
    from ..contract import COMPONENTS
    from ..engine.runner import limits_for
    from ..engine.session import serve_in_session
    from ..sandbox.zygote import ZYGOTE

    components = list(dict.fromkeys(components)) or list(COMPONENTS)
    watcher = Watcher(target, components, verbose=verbose, hints=hints, timeout=timeout)
    ZYGOTE.start()  # before the checks are collected (workers must not inherit them), and before the handlers
    handlers = {sig: signal.signal(sig, watcher.interrupted) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        serve_in_session(watcher.tasks(), watcher.grade, limits_for(watcher.course, timeout), components=components)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    return 0
