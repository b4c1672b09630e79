"""The drill history: finished drills, kept in one local JSON file.

Where: `$DRILLS_HOME/history.json`, by default `~/.transformer-drills/history.json`.
The file holds `{"version": 1, "drills": [...]}`; each drill is

    {"id": "20250101-120000-masking", "workspace": "/path/to/drills/...",
     "started": "2025-01-01T12:00:00", "ended": "2025-01-01T12:07:12",
     "minutes": 15, "interview": false, "outcome": "passed",
     "components": {"masking": {"result": "passed", "time_s": 412.3, "hints": 1}}}

`result` is "passed", "gave up" or "abandoned"; `time_s` is the time from
`drill start` to the first `drill check` that passed the component (for other
results, the time until the drill ended). A missing file is an empty history;
an unreadable one is moved aside to `history.json.corrupt-<timestamp>` and a
fresh history starts, with a warning.
"""
from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from .contract import COMPONENTS

VERSION = 1
PASSED, GAVE_UP, ABANDONED = "passed", "gave up", "abandoned"
BAR_WIDTH = 40
SLOW_S = 15 * 60  # a time at or above this counts as fully slow when judging weakness


def history_path() -> Path:
    """`$DRILLS_HOME/history.json`, or `~/.transformer-drills/history.json`."""
    home = os.environ.get("DRILLS_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".transformer-drills") / "history.json"


class HistoryFile:
    """Load and append to the history; `warnings` collects what was recovered from."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or history_path()
        self.warnings: list[str] = []

    def load(self) -> list[dict]:
        """The finished drills, oldest first; a corrupt file is moved aside and an empty list returned."""
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            return []
        except OSError as exc:
            self.warnings.append(f"could not read the drill history {self.path}: {exc}; using an empty history")
            return []
        try:
            data = json.loads(text)
            drills = data["drills"]
            if not isinstance(drills, list) or not all(_valid_drill(d) for d in drills):
                raise ValueError("unexpected structure")
            return drills
        except (ValueError, KeyError, TypeError) as exc:
            self._move_aside(f"{type(exc).__name__}: {exc}")
            return []

    def _move_aside(self, why: str) -> None:
        aside = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}")
        n = 1
        while aside.exists():
            aside = aside.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{n}")
            n += 1
        try:
            self.path.replace(aside)
            where = f"moved aside to {aside}"
        except OSError as exc:
            where = f"could not be moved aside ({exc})"
        self.warnings.append(f"the drill history {self.path} was unreadable ({why}); it was {where} "
                             "and a fresh history was started")

    def append(self, drill: dict) -> None:
        """Add one finished drill (written atomically)."""
        drills = self.load()
        drills.append(drill)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"version": VERSION, "drills": drills}, indent=2))
        tmp.replace(self.path)


def _valid_drill(drill: object) -> bool:
    if not isinstance(drill, dict) or not isinstance(drill.get("components"), dict):
        return False
    if not isinstance(drill.get("started"), str):
        return False
    for entry in drill["components"].values():
        if not isinstance(entry, dict) or not isinstance(entry.get("result"), str):
            return False
        if not isinstance(entry.get("time_s", 0), (int, float)) or not isinstance(entry.get("hints", 0), int):
            return False
    return True


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
        console.print("No finished drills yet: `python -m grader drill start COMPONENT` begins one.")
        return
    for s in drilled:
        table = Table(title=f"{s.component}  (best {format_duration(s.best_time)})", title_justify="left")
        for column in ("date", "time taken", "hints used", "result"):
            table.add_column(column, justify="right" if column in ("time taken", "hints used") else "left")
        for a in s.attempts:
            style = "green" if a.result == PASSED else "red" if a.result == GAVE_UP else "yellow"
            table.add_row(a.date.replace("T", " ")[:16], format_duration(a.time_s), str(a.hints),
                          Text(a.result, style=style))
        console.print(table)
    console.print(Text("\nTime to pass, per component (█ passed; · not passed):", style="bold"))
    longest = max((a.time_s for s in drilled for a in s.attempts), default=0.0) or 1.0
    for s in drilled:
        console.print(Text(s.component, style="bold"))
        for a in s.attempts:
            width = max(1, round(BAR_WIDTH * a.time_s / longest))
            bar = ("█" if a.result == PASSED else "·") * width
            label = format_duration(a.time_s) + ("" if a.result == PASSED else f" ({a.result})")
            console.print(f"  {a.date[:10]}  {bar} {label}")
