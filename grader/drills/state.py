"""A drill's state: `drill.json` in its workspace, and which drill is the current one.

`Drill` is what one drill records (its components, times, hints, outcome); `current_drill` finds the drill that
`check`, `hint` and `reveal` act on, and refuses (`DrillStateError`) where an unreadable state file may be it.
The commands that change it are in grader/drills/command.py.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import NamedTuple

from ..contract import COMPONENTS
from ..files import write_atomic
from ..i18n import N_
from .history import ABANDONED, GAVE_UP, PASSED, HistoryFile

STATE_FILE = "drill.json"
OPEN = "open"
STATUSES = (OPEN, PASSED, GAVE_UP, ABANDONED)
STATUS_LABELS = {OPEN: N_("open"), PASSED: N_("passed"), GAVE_UP: N_("gave up"), ABANDONED: N_("abandoned")}
MINUTES_PER_COMPONENT = 15.0
FOLDER_TIME = "%Y%m%d-%H%M%S"  # a workspace's name starts with its start time


@dataclass
class Drill:
    id: str
    components: list[str]
    started_at: float  # seconds since the epoch
    minutes: float
    interview: bool
    working_code: bool  # False in a student release: the other components are stubs too
    status: str = OPEN  # open, passed, gave up, abandoned
    ended_at: float | None = None
    hints_used: dict[str, int] = field(default_factory=dict)
    passed_at: dict[str, float] = field(default_factory=dict)  # component -> seconds after the start
    last_status: dict[str, str] = field(default_factory=dict)
    checks: int = 0
    workspace: Path = Path(".")

    @classmethod
    def load(cls, workspace: Path) -> Drill:
        """The drill whose state is `workspace/drill.json`; ValueError (or OSError) saying what is wrong."""
        try:
            data = json.loads((workspace / STATE_FILE).read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError(f"not UTF-8 text: {exc}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError(f"expected a JSON object, got {type(data).__name__}")
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__ and k != "workspace"}
        missing = [k for k in ("id", "components", "started_at", "minutes", "interview", "working_code")
                   if k not in known]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        drill = cls(**known, workspace=workspace)
        drill._validate()
        return drill

    def _validate(self) -> None:
        """ValueError naming the first field of the wrong kind."""
        def number(v) -> bool:
            return isinstance(v, (int, float)) and not isinstance(v, bool)

        def mapping(v, values) -> bool:
            return isinstance(v, dict) and all(values(x) for x in v.values())

        problems = [
            (isinstance(self.id, str), "id is not a string"),
            (isinstance(self.components, list) and bool(self.components)
             and all(isinstance(c, str) and c in COMPONENTS for c in self.components),
             f"components is not a non-empty list of component ids ({self.components!r})"),
            (number(self.started_at), "started_at is not a number"),
            (number(self.minutes) and self.minutes > 0, "minutes is not a positive number"),
            (isinstance(self.interview, bool) and isinstance(self.working_code, bool),
             "interview or working_code is not true/false"),
            (self.status in STATUSES, f"status {self.status!r} is not one of {', '.join(STATUSES)}"),
            (self.ended_at is None or number(self.ended_at), "ended_at is not a number"),
            (mapping(self.hints_used, lambda x: isinstance(x, int) and not isinstance(x, bool)),
             "hints_used is not a map of components to counts"),
            (mapping(self.passed_at, number), "passed_at is not a map of components to times"),
            (mapping(self.last_status, lambda x: isinstance(x, str)),
             "last_status is not a map of components to statuses"),
            (isinstance(self.checks, int) and not isinstance(self.checks, bool), "checks is not a count"),
        ]
        for ok, problem in problems:
            if not ok:
                raise ValueError(problem)

    def save(self) -> None:
        data = {k: v for k, v in asdict(self).items() if k != "workspace"}
        write_atomic(self.workspace / STATE_FILE, json.dumps(data, indent=2))

    @property
    def is_open(self) -> bool:
        return self.status == OPEN

    def elapsed(self, now: float | None = None) -> float:
        end = self.ended_at if self.ended_at is not None else (now or time.time())
        return max(0.0, end - self.started_at)

    def time_is_up(self, now: float | None = None) -> bool:
        return self.elapsed(now) > self.minutes * 60

    def details_hidden(self, now: float | None = None) -> bool:
        """Interview mode hides messages and hints until the drill ends (pass, give-up or time up)."""
        return self.interview and self.is_open and not self.time_is_up(now)

    def history_entry(self) -> dict:
        """The finished drill as the history stores it."""
        def iso(t: float) -> str:
            return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))

        elapsed = self.elapsed()
        components = {c: {"result": PASSED if c in self.passed_at else self.status,
                          "time_s": round(self.passed_at.get(c, elapsed), 1),
                          "hints": self.hints_used.get(c, 0)} for c in self.components}
        return {"id": self.id, "workspace": str(self.workspace), "started": iso(self.started_at),
                "ended": iso(self.ended_at or time.time()), "minutes": self.minutes, "interview": self.interview,
                "outcome": self.status, "components": components}

    def finish(self, status: str, history: HistoryFile) -> None:
        """End the drill (passed, gave up or abandoned) and add it to the history."""
        self.status, self.ended_at = status, time.time()
        self.save()
        history.append(self.history_entry())


class BrokenDrill(NamedTuple):
    """A workspace whose drill.json cannot be read or makes no sense."""

    folder: Path
    problem: str

    @property
    def state_file(self) -> Path:
        return self.folder / STATE_FILE

    def started_by_name(self) -> float | None:
        """The start time its folder name gives (to the second), or None if the name has none."""
        try:
            return time.mktime(time.strptime(self.folder.name[:15], FOLDER_TIME))
        except (ValueError, OverflowError):
            return None


class DrillStateError(Exception):
    """The current drill's state file is unreadable; acting on another drill instead would mislead."""

    def __init__(self, broken: list[BrokenDrill]) -> None:
        self.broken = broken
        super().__init__("; ".join(f"{b.state_file}: {b.problem}" for b in broken))


def all_drills(root: Path) -> tuple[list[Drill], list[BrokenDrill]]:
    """Every drill under `root`, oldest first, and the workspaces whose drill.json is unreadable."""
    drills: list[Drill] = []
    broken: list[BrokenDrill] = []
    if not root.is_dir():
        return drills, broken
    for folder in sorted(p for p in root.iterdir() if (p / STATE_FILE).is_file()):
        try:
            drills.append(Drill.load(folder))
        except (OSError, ValueError, TypeError) as exc:
            broken.append(BrokenDrill(folder, str(exc) or type(exc).__name__))
    return sorted(drills, key=lambda d: d.started_at), broken


def _maybe_current(broken: list[BrokenDrill], drills: list[Drill]) -> list[BrokenDrill]:
    """The unreadable drills that may be the latest one started: not clearly older than a readable drill.

    `start` never leaves an older drill open behind a newer one, so a drill started
    (by its folder name) a second or more before the latest readable drill is over.
    """
    latest = drills[-1].started_at if drills else None
    return [b for b in broken
            if latest is None or (started := b.started_by_name()) is None or started + 1 > latest]


def current_drill(root: Path, warn, *, open_only: bool = False) -> Drill | None:
    """The open drill (the latest, should there be several), else the latest drill unless `open_only`.

    Raises DrillStateError when a drill whose state is unreadable may be the
    current one; unreadable older drills are reported through `warn` and skipped.
    """
    drills, broken = all_drills(root)
    current = _maybe_current(broken, drills)
    if current:
        raise DrillStateError(current)
    for b in broken:
        warn(f"skipping the older drill {b.folder}: its {STATE_FILE} is unreadable ({b.problem})")
    open_drills = [d for d in drills if d.is_open]
    if open_drills:
        return open_drills[-1]
    return None if open_only or not drills else drills[-1]


def move_aside(broken: BrokenDrill) -> Path:
    """Rename an unreadable drill.json so that it no longer counts as a drill; the new path."""
    stamp = time.strftime(FOLDER_TIME)
    aside, n = broken.folder / f"{STATE_FILE}.corrupt-{stamp}", 2
    while aside.exists():
        aside, n = broken.folder / f"{STATE_FILE}.corrupt-{stamp}-{n}", n + 1
    broken.state_file.replace(aside)
    return aside
