"""course.yml: components in teaching order, their points, and the weights of their checks."""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

import yaml

from .contract import COMPONENTS, FILES, TRACKS
from .paths import COURSE_FILE

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where available
# Points are whole hundredths: every channel shows them to two decimals, so each check's points,
# each component's and the total are the same numbers everywhere and add up exactly.
POINT_UNITS = 100


class CourseError(Exception):
    """course.yml is missing something or contradicts the contract."""


@dataclass(frozen=True)
class Component:
    id: str
    title: str
    points: float
    checks: dict[str, float]  # check (test function) name -> weight
    hint: str = ""
    hidden: frozenset[str] = frozenset()  # checks that report only pass/fail to the student
    forbidden: tuple[str, ...] = ()  # library calls that would skip the exercise (dotted names)
    hints: tuple[str, ...] = ()  # a drill's hint ladder, from a nudge to the key line (course.yml `hints:`)
    # `core:` the checks that compare outputs with a trusted expectation; every check that is neither
    # core nor `standalone:` (a check of __init__'s layout, which pays on its own) is gated: it pays
    # in proportion to what the core checks earn. Without `core:` every check pays on its own.
    core: tuple[str, ...] = ()
    standalone: frozenset[str] = frozenset()

    @property
    def file(self) -> str:
        """The exercise file the component's code is in (the contract's table, grader/contract.py)."""
        return FILES[self.id][0]

    @property
    def gated(self) -> tuple[str, ...]:
        """The checks whose points count only as far as the core checks pass, in course order."""
        if not self.core:
            return ()
        return tuple(c for c in self.checks if c not in self.core and c not in self.standalone)

    def check_units(self) -> dict[str, int]:
        """Each check's points in 1/POINT_UNITS, shared by weight and adding up exactly to the component's.

        Largest remainder: every check gets the floor of its share, and the units left over go to the
        largest fractional parts (the first listed on a tie).
        """
        total_units = round(self.points * POINT_UNITS)
        total_weight = sum(Fraction(w) for w in self.checks.values())
        shares = {name: total_units * Fraction(weight) / total_weight for name, weight in self.checks.items()}
        units = {name: math.floor(share) for name, share in shares.items()}
        left = total_units - sum(units.values())
        for name in sorted(shares, key=lambda n: -(shares[n] - units[n]))[:left]:
            units[name] += 1
        return units

    @property
    def hint_ladder(self) -> tuple[str, ...]:
        """The hints in the order a drill gives them: `hints:` when listed, else the one `hint:`."""
        return self.hints or ((self.hint,) if self.hint else ())


@dataclass(frozen=True)
class Assignment:
    """A group of components handed out together (course.yml `assignments:`; the nbgrader channel)."""

    id: str
    title: str
    components: tuple[str, ...]


@dataclass(frozen=True)
class Course:
    name: str
    components: tuple[Component, ...]
    timeout: float  # seconds per check (course.yml `defaults: timeout`)
    memory_mb: int  # memory a worker running student code may add (`defaults: memory_mb`)
    assignments: tuple[Assignment, ...] = ()  # the nbgrader assignments (`assignments:`)
    component_timeout: float = 60.0  # student time per component, its checks together (`component_timeout`)
    submission_timeout: float = 600.0  # seconds per submission, its components together (`submission_timeout`)
    grader_memory_mb: int = 4096  # address space the grading process may add once torch is in (`grader_memory_mb`)

    @property
    def hidden_checks(self) -> frozenset[tuple[str, str]]:
        """{(component id, check name)} of every hidden check: left out of releases, after_published on Gradescope."""
        return frozenset((c.id, check) for c in self.components for check in c.hidden)

    @property
    def forbidden(self) -> tuple[tuple[str, tuple[str, ...]], ...]:
        """(component id, its forbidden library calls) for each component that forbids some (`Limits.forbidden`)."""
        return tuple((c.id, tuple(c.forbidden)) for c in self.components if c.forbidden)

    @property
    def total_points(self) -> float:
        return sum(c.points for c in self.components)

    def component(self, component_id: str) -> Component:
        for component in self.components:
            if component.id == component_id:
                return component
        raise CourseError(f"unknown component {component_id!r}; known: {', '.join(c.id for c in self.components)}")


def _hints(entry: dict, path: str | Path) -> tuple[str, ...]:
    """A component's `hints:` ladder (optional): a list of strings."""
    hints = entry.get("hints") or []
    if not isinstance(hints, list) or not all(isinstance(h, str) for h in hints):
        raise CourseError(f"{path}: hints of component {entry['id']} must be a list of strings")
    return tuple(hints)


def _gating(entry: dict, checks: dict[str, float], hidden: frozenset[str],
            path: str | Path) -> tuple[tuple[str, ...], frozenset[str]]:
    """A component's `core:` and `standalone:` lists, checked against its checks."""
    lists = {}
    for key in ("core", "standalone"):
        names = entry.get(key) or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise CourseError(f"{path}: {key} of component {entry['id']} must be a list of check names")
        unknown = sorted(set(names) - set(checks))
        if unknown:
            raise CourseError(f"{path}: component {entry['id']} lists {key} checks it does not weight: {unknown}")
        # a student release drops the hidden checks, so they can only be gated
        if set(names) & hidden:
            raise CourseError(f"{path}: component {entry['id']} lists hidden checks as {key}: "
                              f"{sorted(set(names) & hidden)}; a hidden check is always gated")
        lists[key] = names
    core, standalone = lists["core"], lists["standalone"]
    if set(core) & set(standalone):
        raise CourseError(f"{path}: component {entry['id']} lists checks as both core and standalone: "
                          f"{sorted(set(core) & set(standalone))}")
    if standalone and not core:
        raise CourseError(f"{path}: component {entry['id']} lists standalone checks but no core checks")
    return tuple(core), frozenset(standalone)


def load_course(path: str | Path = COURSE_FILE) -> Course:
    """Read and check course.yml (parsed once per version of the file in a process)."""
    try:
        stat = Path(path).stat()
    except FileNotFoundError:
        raise CourseError(f"{path} does not exist") from None
    return _load_course(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=8)
def _load_course(path: str, mtime_ns: int, size: int) -> Course:
    try:
        data = yaml.load(Path(path).read_text(), Loader=_YAML_LOADER)
    except FileNotFoundError:
        raise CourseError(f"{path} does not exist") from None
    except yaml.YAMLError as exc:
        raise CourseError(f"{path} is not valid YAML: {exc}") from None
    components = []
    for entry in data.get("components") or []:
        missing = {"id", "title", "points", "checks"} - set(entry)
        if missing:
            raise CourseError(f"component {entry.get('id', '?')} in {path} lacks {sorted(missing)}")
        if entry["id"] not in COMPONENTS:
            raise CourseError(f"{path}: {entry['id']!r} is not a component of the contract")
        if "file" in entry:
            raise CourseError(f"{path}: component {entry['id']} names its file; the contract's table says where each "
                              "component lives (grader/contract.py FACTS): drop `file:`")
        checks = {str(k): float(v) for k, v in (entry["checks"] or {}).items()}
        if not checks or any(w <= 0 for w in checks.values()):
            raise CourseError(f"{path}: component {entry['id']} needs checks with positive weights")
        hidden = frozenset(str(h) for h in entry.get("hidden") or [])
        if not hidden <= set(checks):
            raise CourseError(f"{path}: component {entry['id']} hides checks it does not list: {sorted(hidden - set(checks))}")
        forbidden = tuple(str(f) for f in entry.get("forbidden") or [])
        points = float(entry["points"])
        if points < 0 or abs(points * POINT_UNITS - round(points * POINT_UNITS)) > 1e-6:
            raise CourseError(f"{path}: component {entry['id']} has {points:g} points; points are whole "
                              f"multiples of {1 / POINT_UNITS:g}")
        core, standalone = _gating(entry, checks, hidden, path)
        components.append(Component(entry["id"], entry["title"], points, checks,
                                    entry.get("hint", ""), hidden, forbidden, _hints(entry, path), core, standalone))
    if len({c.id for c in components}) != len(components):
        raise CourseError(f"{path} lists a component twice")
    defaults = data.get("defaults") or {}
    missing = {"timeout", "memory_mb"} - set(defaults)
    if missing:
        raise CourseError(f"{path}: defaults lacks {sorted(missing)}")
    return Course(data.get("name", "transformer-drills"), tuple(components), float(defaults["timeout"]),
                  int(defaults["memory_mb"]), _assignments(data.get("assignments"), components, path),
                  float(defaults.get("component_timeout", 6 * float(defaults["timeout"]))),
                  float(defaults.get("submission_timeout", 60 * float(defaults["timeout"]))),
                  int(defaults.get("grader_memory_mb", 4096)))


def load_assignments(path: str | Path = COURSE_FILE) -> tuple[Assignment, ...]:
    """course.yml's `assignments:` (see Course.assignments)."""
    return load_course(path).assignments


def _assignments(entries, components: list[Component], path: str | Path) -> tuple[Assignment, ...]:
    """`assignments:` (id, title, and `components:` or a `track:` of the contract, whose components it then
    holds); without it, one assignment holding every component."""
    if not entries:
        return (Assignment("transformer", "Build a Transformer", tuple(c.id for c in components)),)
    known = {c.id for c in components}
    assignments = []
    for entry in entries:
        if not isinstance(entry, dict) or "id" not in entry or not {"components", "track"} & set(entry):
            raise CourseError(f"{path}: each assignment needs an id and components (or a track)")
        if "track" in entry and str(entry["track"]) not in TRACKS:
            raise CourseError(f"{path}: assignment {entry['id']} names an unknown track {entry['track']!r}")
        listed = entry["components"] if "components" in entry else TRACKS[str(entry["track"])]
        ids = tuple(str(c) for c in listed or [])
        unknown = [c for c in ids if c not in known]
        if not ids or unknown:
            raise CourseError(f"{path}: assignment {entry['id']} lists unknown or no components: {unknown}")
        assignments.append(Assignment(str(entry["id"]), str(entry.get("title", entry["id"])), ids))
    if len({a.id for a in assignments}) != len(assignments):
        raise CourseError(f"{path} lists an assignment twice")
    return tuple(assignments)
