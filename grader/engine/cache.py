"""Reuse a component's results when nothing it depends on has changed.

A component's results depend on the checks, the grader, course.yml, and on
every student file: each of them can run while the component is graded
(imported by a sibling, read and run by path, run in the worker that
components share before this one's turn, run by the loader in the process that
tries every file). The key therefore covers all of the submission's files
(the contract's files: the only ones a private copy holds), each by its
syntax tree, so that comments and layout do not count. A class where many
students hand in the same code (untouched stubs, the same solution, copies
that differ in comments) grades it once; one student's file never decides
another's score, whichever is graded first.
"""
from __future__ import annotations

import ast
import hashlib
import json
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path

from ..contract import MODULES, OWNERS, component_modules
from ..files import write_atomic
from ..results import ERROR, TIMEOUT, CaseResult
from ..source import UnreadableFile, read_file
from ..paths import COURSE_FILE, GRADER, ROOT



@lru_cache(maxsize=None)
def grader_fingerprint(checks_dir: str) -> str:
    """A hash of everything that decides a grade besides the submission."""
    digest = hashlib.sha256()
    paths = sorted([*Path(checks_dir).rglob("*.py"), *GRADER.rglob("*.py"), COURSE_FILE])
    for path in paths:
        digest.update(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def component_key(folder: str | Path, component: str, checks_dir: str | Path, settings: str) -> str:
    digest = hashlib.sha256(f"{grader_fingerprint(str(checks_dir))}|{component}|{settings}|".encode())
    digest.update(submission_digest(folder).encode())
    return digest.hexdigest()


def submission_digest(folder: str | Path) -> str:
    """A hash of every file of the submission that code can load (see the module docstring)."""
    digest = hashlib.sha256()
    for module in MODULES:
        digest.update(f"|{module}:".encode() + _tree(Path(folder) / f"{module}.py"))
    return digest.hexdigest()


def modules_read(folder: str | Path, component: str) -> tuple[str, ...]:
    """The student files whose code `component`'s results depend on: those with its graded code, and every
    sibling when one of those imports a sibling's own helpers (`from .attention import _require`)."""
    own = component_modules(component)
    if any(_imports_siblings(Path(folder) / f"{module}.py") for module in own):
        return MODULES
    return own


def _tree(path: Path) -> bytes:
    """The file's syntax tree (comments and layout do not count), else its bytes."""
    try:
        source = read_file(path)
    except UnreadableFile:
        return b"<missing>"
    return _tree_of(source)


@lru_cache(maxsize=256)
def _tree_of(source: bytes) -> bytes:
    """Parsed once per distinct file, however many components and students hand it in."""
    try:
        return b"<tree>" + ast.dump(ast.parse(source)).encode()
    except (SyntaxError, ValueError):
        return b"<bytes>" + source


def _imports_siblings(path: Path) -> bool:
    """Whether the file imports a sibling's own names (`from .attention import _require`, `from . import vit`),
    not only the contract's."""
    try:
        tree = ast.parse(read_file(path))
    except (UnreadableFile, SyntaxError, ValueError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level:
            module = (node.module or "").split(".")[0]
            if module not in OWNERS or any(alias.name.split(".")[0] not in {q.partition(".")[0] for q in OWNERS[module]}
                                           for alias in node.names):
                return True
    return False


class ResultCache:
    """Component results by key, in memory and, given a folder, on disk (shared by batch jobs)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder else None
        self.memory: dict[str, list[CaseResult]] = {}
        self.hits = self.misses = 0

    def key(self, folder: str | Path, component: str, checks_dir: str | Path, settings: str) -> str:
        """The key of `component`'s results for the submission in `folder` (`component_key`)."""
        return component_key(folder, component, checks_dir, settings)

    def get(self, key: str) -> list[CaseResult] | None:
        cases = self.memory.get(key)
        if cases is None and self.folder is not None:
            try:
                cases = [CaseResult(**c) for c in json.loads((self.folder / f"{key}.json").read_text())]
            except (OSError, ValueError, TypeError):
                cases = None
        if cases is None:
            self.misses += 1
            return None
        self.hits += 1
        self.memory[key] = cases
        return cases

    def put(self, key: str, cases: list[CaseResult]) -> None:
        """Remember results unless a case timed out or crashed (those may not happen twice)."""
        if not cases or any(c.status in (TIMEOUT, ERROR) for c in cases):
            return
        self.memory[key] = cases
        if self.folder is not None:
            write_atomic(self.folder / f"{key}.json", json.dumps([asdict(c) for c in cases]))
