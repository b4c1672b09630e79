"""The bug catalogue: realistic mistakes, each a small edit of the reference solution.

Each `bugs_<component>.py` holds `BUGS`, a list of `Bug`. A bug must fail at
least one check of its own component and no check of any other component.
"""
from __future__ import annotations

import importlib
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
ALTERNATIVES = ROOT / "selftests" / "alternatives"


@dataclass(frozen=True)
class Bug:
    component: str
    name: str
    file: str  # a file of solutions/, e.g. "attention.py"
    old: str  # an exact snippet that occurs once in that file
    new: str  # what the mistake writes instead
    description: str  # one sentence: the mistake as a learner makes it
    # How its component's feedback must name it (selftests/test_diagnosis.py): every diagnosis of its failing
    # checks names one of these known mistakes, by id (tests/checklib/catalogue.py; and there is one at least) ...
    diagnosis: tuple[str, ...] = ()
    # ... or, for a mistake no value shows (a missing ValueError, a library call), the failing message holds
    # this phrase and no check offers a diagnosis at all.
    named_by: str = ""
    # More edits (file, old, new) of the same mistake, where it spans files (a forward and the cache it fills).
    also: tuple[tuple[str, str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.component}:{self.name}"


def all_bugs() -> list[Bug]:
    bugs: list[Bug] = []
    for path in sorted(Path(__file__).parent.glob("bugs_*.py")):
        bugs += importlib.import_module(f"selftests.bugs.{path.stem}").BUGS
    return bugs


def materialize(bug: Bug, dest: Path) -> Path:
    """Copy solutions/ to `dest` with the bug applied; returns `dest`."""
    return materialize_edits(f"bug {bug.id}", [(bug.file, bug.old, bug.new), *bug.also], dest)


def materialize_edits(label: str, edits: list[tuple[str, str, str]], dest: Path) -> Path:
    """Copy solutions/ to `dest` with each edit (file, old, new) applied, `old` occurring once; returns `dest`."""
    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for file, old, new in edits:
        path = dest / file
        source = path.read_text()
        count = source.count(old)
        if count != 1:
            raise ValueError(f"{label}: snippet occurs {count} times in solutions/{file}, expected once")
        path.write_text(source.replace(old, new))
    return dest


def alternative_names() -> list[str]:
    return sorted(p.name for p in ALTERNATIVES.iterdir() if p.is_dir() and not p.name.startswith("_"))


def materialize_alternative(name: str, dest: Path) -> Path:
    """solutions/ overlaid with the files of selftests/alternatives/<name>/."""
    shutil.copytree(SOLUTIONS, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for path in (ALTERNATIVES / name).glob("*.py"):
        shutil.copy(path, dest / path.name)
    return dest
