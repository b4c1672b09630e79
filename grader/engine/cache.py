"""Reuse a component's results when nothing it depends on has changed.

While one component's checks run, every other component's code is a trusted
stand-in, so its results depend only on the student files that component
loads, the checks, the grader and course.yml. Those make the key, the student
files by their syntax tree, so comments and layout do not count. A class where
many students hand in the same code for a component (untouched stubs, shared
starter code, copies) then grades each distinct version once.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
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
    digest = hashlib.sha256(f"{grader_fingerprint(str(checks_dir))}|{component}|{settings}".encode())
    own = component_modules(component)
    for module in own:
        digest.update(f"|{module}:".encode())
        digest.update(b"\0".join(_code_of(Path(folder) / f"{module}.py", module, component)))
    for module in modules_read(folder, component):
        if module not in own:
            digest.update(f"|sibling {module}:".encode() + _tree(Path(folder) / f"{module}.py"))
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
    try:
        return ast.dump(ast.parse(source)).encode()
    except (SyntaxError, ValueError):
        return source


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


def _code_of(path: Path, module: str, component: str) -> list[bytes]:
    """What the file does for `component`: its syntax tree (no comments or layout), else its bytes.

    The bodies of contract functions that another component owns are left out:
    while `component` is graded they are replaced by stand-ins. That holds only
    where the file reaches them by calling them by name, so a body whose name is
    used any other way (an alias, say) stays in.
    """
    try:
        source = read_file(path)
    except UnreadableFile:
        return [b"<missing>"]
    pieces = _pieces(source)
    if pieces is None:
        return [source]
    statements, used = pieces
    foreign = {q.rpartition(".")[2] for q, owners in OWNERS[module].items() if component not in owners} - used
    return [b"<stand-in>" if name in foreign else dump for name, dump in statements]


@lru_cache(maxsize=64)
def _pieces(source: bytes) -> tuple[list[tuple[str | None, bytes]], frozenset[str]] | None:
    """The file's statements as (name of the function defined or None, syntax tree dump), and the used names.

    A class counts as its header and its own statements, so that one method can
    be left out. Parsed once per file however many components load it.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    used = frozenset(_names_used_other_than_called(tree))
    statements: list[tuple[str | None, bytes]] = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            body, node.body = node.body, []
            statements.append((None, ast.dump(node).encode()))
            statements += [(_defined(child), ast.dump(child).encode()) for child in body]
            statements.append((None, b"<end of class>"))
        else:
            statements.append((_defined(node), ast.dump(node).encode()))
    return statements, used


def _defined(node: ast.stmt) -> str | None:
    return node.name if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _names_used_other_than_called(tree: ast.Module) -> set[str]:
    """Names (and attribute names) that appear other than as the callee of a call or a definition."""
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and id(node) not in called:
            used.add(node.id)
        elif isinstance(node, ast.Attribute) and id(node) not in called:
            used.add(node.attr)
    return used


class ResultCache:
    """Component results by key, in memory and, given a folder, on disk (shared by batch jobs)."""

    def __init__(self, folder: str | Path | None = None) -> None:
        self.folder = Path(folder) if folder else None
        self.memory: dict[str, list[CaseResult]] = {}
        self.hits = self.misses = 0

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
