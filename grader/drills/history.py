"""The drill history: finished drills, kept in one local JSON file.

Where: `$DRILLS_HOME/history.json`, by default `~/.transformer-drills/history.json`.
The file holds `{"version": 1, "drills": [...]}`; each drill is

    {"id": "20250101-120000-masking", "workspace": "/path/to/drills/...",
     "started": "2025-01-01T12:00:00", "ended": "2025-01-01T12:07:12",
     "minutes": 15, "interview": false, "outcome": "passed",
     "components": {"masking": {"result": "passed", "time_s": 412.3, "hints": 1}}}

`result` is "passed", "gave up" or "abandoned"; `time_s` is the time from
`drill start` to the first `drill check` that passed the component (for other
results, the time until the drill ended). A missing file is an empty history.
Reading (`drill history`, `drill start --random`) never changes the file: an
entry that makes no sense is skipped with a warning, the others are used, and an
unreadable file reads as empty. The next drill to end repairs it: bad entries
are dropped (the file as it was is kept as `history.json.corrupt-<timestamp>`),
or an unreadable file is moved aside there and a fresh history starts.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..contract import COMPONENTS
from ..files import write_atomic
from ..i18n import _

VERSION = 1
PASSED, GAVE_UP, ABANDONED = "passed", "gave up", "abandoned"
BAR_WIDTH = 40
SLOW_S = 15 * 60  # a time at or above this counts as fully slow when judging weakness


def history_path() -> Path:
    """`$DRILLS_HOME/history.json`, or `~/.transformer-drills/history.json`."""
    home = os.environ.get("DRILLS_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".transformer-drills") / "history.json"


class HistoryFile:
    """Load and append to the history; `warnings` collects what was skipped or repaired.

    Reading never changes the file. Entries that make no sense are skipped (and
    reported), the others kept; a file that cannot be read as a history at all
    reads as an empty one. Only `append`, which writes, repairs: it drops the
    entries that make no sense, keeping the file as it was beside it, or moves an
    unreadable file aside and starts a fresh history.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or history_path()
        self.warnings: list[str] = []

    def load(self) -> list[dict]:
        """The finished drills that make sense, in file order; the file is left as it is."""
        drills, problem, skipped = self._read()
        if problem is not None:
            self.warnings.append(f"the drill history {self.path} is unreadable ({problem}); it is read as empty and "
                                 f"left as it is (the next drill to end moves it aside to {self.path.name}.corrupt-"
                                 "<time> and starts a fresh history)")
        elif skipped:
            self.warnings.append(f"skipping {_entries(len(skipped))} of the drill history {self.path}, which make(s) "
                                 f"no sense ({'; '.join(skipped)}); {_entries(len(drills))} used. The file is left "
                                 "as it is (the next drill to end writes the history without the skipped ones and "
                                 f"keeps the file as it was in {self.path.name}.corrupt-<time>)")
        return drills

    def _read(self) -> tuple[list[dict], str | None, list[str]]:
        """(the entries that make sense, why the whole file is unreadable or None, a line per skipped entry)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return [], None, []
        except (OSError, UnicodeDecodeError) as exc:
            return [], f"{type(exc).__name__}: {exc}", []
        try:
            data = json.loads(text)
        except ValueError as exc:
            return [], f"not valid JSON: {exc}", []
        if not isinstance(data, dict) or not isinstance(data.get("drills"), list):
            return [], 'not a JSON object with a list "drills"', []
        drills, skipped = [], []
        for n, drill in enumerate(data["drills"], start=1):
            problem = _entry_problem(drill)
            if problem is None:
                drills.append(drill)
            else:
                skipped.append(f"entry {n}: {problem}")
        return drills, None, skipped

    def _aside(self) -> Path:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        aside, n = self.path.with_name(f"{self.path.name}.corrupt-{stamp}"), 1
        while aside.exists():
            aside, n = self.path.with_name(f"{self.path.name}.corrupt-{stamp}-{n}"), n + 1
        return aside

    def append(self, drill: dict) -> None:
        """Add one finished drill (written atomically), repairing the file first if need be."""
        drills, problem, skipped = self._read()
        if problem is not None:
            aside = self._aside()
            try:
                self.path.replace(aside)
                where = f"moved aside to {aside}"
            except OSError as exc:
                where = f"could not be moved aside ({exc})"
            self.warnings.append(f"the drill history {self.path} was unreadable ({problem}); it was {where} "
                                 "and a fresh history was started")
        elif skipped:
            aside = self._aside()
            shutil.copy2(self.path, aside)
            self.warnings.append(f"the drill history {self.path} held {_entries(len(skipped))} that made no sense "
                                 f"({'; '.join(skipped)}): dropped, {_entries(len(drills))} kept. "
                                 f"The file as it was is kept in {aside}")
        drills.append(drill)
        write_atomic(self.path, json.dumps({"version": VERSION, "drills": drills}, indent=2))


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _entry_problem(drill: object) -> str | None:
    """Why one history entry makes no sense, or None when it is usable."""
    def number(v: object) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    if not isinstance(drill, dict):
        return f"not an object ({type(drill).__name__})"
    if not isinstance(drill.get("started"), str):
        return '"started" is not a date'
    if not isinstance(drill.get("components"), dict):
        return '"components" is not an object'
    for component, entry in drill["components"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), str):
            return f"{component} has no result"
        if not number(entry.get("time_s", 0)) or not isinstance(entry.get("hints", 0), int) \
                or isinstance(entry.get("hints", 0), bool):
            return f"{component}'s time_s or hints is not a number"
    return None


@dataclass
class Attempt:
    """One component in one finished drill."""

    date: str
    result: str
    time_s: float
    hints: int


@dataclass
class ComponentStats:
    component: str
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def graded(self) -> list[Attempt]:
        """Attempts that count for strength (an abandoned drill says nothing either way)."""
        return [a for a in self.attempts if a.result != ABANDONED]

    @property
    def best_time(self) -> float | None:
        times = [a.time_s for a in self.attempts if a.result == PASSED]
        return min(times) if times else None

    @property
    def last_drilled(self) -> str:
        return max((a.date for a in self.attempts), default="")

    def weakness(self) -> float:
        """0 (strong) to 3 (weak): failure rate, hints per attempt (3 = a whole ladder), slowness."""
        graded = self.graded
        if not graded:
            return 0.0
        fail_rate = sum(a.result != PASSED for a in graded) / len(graded)
        hints = min(sum(a.hints for a in graded) / len(graded) / 3, 1.0)
        slow = min(sum(a.time_s for a in graded) / len(graded) / SLOW_S, 1.0)
        return fail_rate + hints + slow


def component_stats(drills: list[dict]) -> dict[str, ComponentStats]:
    """Per component (every id of the contract), its attempts in date order."""
    stats = {c: ComponentStats(c) for c in COMPONENTS}
    for drill in sorted(drills, key=lambda d: d.get("started", "")):
        for component, entry in drill["components"].items():
            if component in stats:
                stats[component].attempts.append(Attempt(drill["started"], entry["result"],
                                                         float(entry.get("time_s", 0)), int(entry.get("hints", 0))))
    return stats


def pick_components(n: int, drills: list[dict], rng: random.Random) -> list[str]:
    """N components: never drilled first, then the weakest, then the least recently drilled.

    Weakness is rounded to a tenth so that recency decides between near equals;
    the random number generator breaks the remaining ties.
    """
    stats = component_stats(drills)

    def key(component: str) -> tuple:
        s = stats[component]
        if not s.attempts:
            return (0, 0.0, "", rng.random())
        return (1, -round(s.weakness(), 1), s.last_drilled, rng.random())

    return sorted(COMPONENTS, key=key)[:n]


def format_duration(seconds: float | None) -> str:
    """m:ss (or h:mm:ss); '-' for None."""
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def render_history(drills: list[dict], console) -> None:
    """A table per drilled component (date, time taken, hints, result; best time) and a bar chart of times."""
    from rich.table import Table
    from rich.text import Text

    stats = component_stats(drills)
    drilled = [s for s in stats.values() if s.attempts]
    if not drilled:
        console.print(_("No finished drills yet: `python -m grader drill start COMPONENT` begins one."))
        return
    results = {PASSED: _("passed"), GAVE_UP: _("gave up"), ABANDONED: _("abandoned")}
    for s in drilled:
        table = Table(title=_("{component}  (best {duration})").format(component=s.component,
                                                                       duration=format_duration(s.best_time)),
                      title_justify="left")
        table.add_column(_("date"))
        table.add_column(_("time taken"), justify="right")
        table.add_column(_("hints used"), justify="right")
        table.add_column(_("result"))
        for a in s.attempts:
            style = "green" if a.result == PASSED else "red" if a.result == GAVE_UP else "yellow"
            table.add_row(a.date.replace("T", " ")[:16], format_duration(a.time_s), str(a.hints),
                          Text(results.get(a.result, a.result), style=style))
        console.print(table)
    console.print(Text("\n" + _("Time to pass, per component (█ passed; · not passed):"), style="bold"))
    longest = max((a.time_s for s in drilled for a in s.attempts), default=0.0) or 1.0
    for s in drilled:
        console.print(Text(s.component, style="bold"))
        for a in s.attempts:
            width = max(1, round(BAR_WIDTH * a.time_s / longest))
            bar = ("█" if a.result == PASSED else "·") * width
            label = format_duration(a.time_s) + ("" if a.result == PASSED else f" ({results.get(a.result, a.result)})")
            console.print(f"  {a.date[:10]}  {bar} {label}")
