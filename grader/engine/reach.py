"""Which contract modules a component's checks can reach, and so which stand-in pieces its worker holds.

A worker grading component C holds the pieces (grader/sandbox/standins/) of the contract names, not C's own,
defined in the modules reached from

- C's own files, and the modules of the names C's check file calls (through tests/checklib/adapters.py, or a
  grader tool that wraps one: `new_trusted("RecordingKVCache")`);

following, from each module reached, the submission's own imports of its siblings (`from .rope import
apply_rope`; its file read as syntax, never run) and the modules that the pieces loaded for it call through
`impl`. Every other piece stays out of the worker, so that code run there cannot carry out the answers of
components it has nothing to do with. A name that the submission reaches no way read here (a built string,
importlib) is its own code there: graded in context, as in a student release.
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from ..contract import MODULES, OWNERS, component_modules
from ..paths import CHECKS_DIR
from ..sandbox import standins
from ..source import UnreadableFile, read_file

_DOTTED = re.compile(rf"[\"']((?:{'|'.join(MODULES)})\.\w+)[\"']")  # "rope.apply_rope": an adapter's entry point
_ADAPTER_USE = re.compile(r"\badapters\.(\w+)")
_TOOL = re.compile(r"\bnew_trusted\(\s*[\"'](\w+)[\"']")


def pieces_for(folder: str | Path, component: str, mates: frozenset[str] = frozenset(),
               trusted: tuple[str, ...] = (), checks_dir: Path = CHECKS_DIR) -> frozenset[str]:
    """The pieces a worker grading `component` (sharing it with `mates`) holds for the submission in `folder`."""
    graded = {component, *mates}
    modules = reached(folder, graded, checks_dir)
    names = [name for module in modules for name in OWNERS[module]]
    return standins.available_for(component, trusted, mates, names=names)


def reached(folder: str | Path, components: Iterable[str], checks_dir: Path = CHECKS_DIR) -> frozenset[str]:
    """The contract modules that the checks of `components` can reach in the submission in `folder`."""
    components = set(components)
    todo = {m for c in components for m in (*component_modules(c), *checked_modules(checks_dir, c))}
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        todo |= sibling_imports(Path(folder) / f"{module}.py")
        for name, owners in OWNERS[module].items():
            piece = standins.PIECES.get(name)
            if piece is not None and not owners & components:
                todo |= piece_modules(piece)
    return frozenset(seen)


@lru_cache(maxsize=None)
def checked_modules(checks_dir: Path, component: str) -> frozenset[str]:
    """The contract modules whose entry points `component`'s check file calls, by the adapters it uses and
    the grader tools it makes. (Read as text: parsing the check files took 0.12 s of every grade.)"""
    text = _text(Path(checks_dir) / f"test_{component}.py")
    adapters = _adapter_modules(Path(checks_dir) / "checklib" / "adapters.py")
    modules = set(_named_modules(text))
    for adapter in _ADAPTER_USE.findall(text):
        modules |= adapters.get(adapter, frozenset())
    return frozenset(modules)


@lru_cache(maxsize=None)
def _adapter_modules(path: Path) -> dict[str, frozenset[str]]:
    """adapter function -> the contract modules it names (`impl.fn("rope.apply_rope")`, a tool it makes)."""
    chunks = re.split(r"^def ", _text(path), flags=re.MULTILINE)[1:]  # adapters.py: one top-level def each
    return {chunk.partition("(")[0]: frozenset(_named_modules(chunk)) for chunk in chunks}


def _named_modules(text: str) -> Iterable[str]:
    """The modules of the entry points `text` names as "module.name" and of the tools it makes."""
    for dotted in _DOTTED.findall(text):
        yield dotted.partition(".")[0]
    for tool in _TOOL.findall(text):
        yield from _tool_modules(tool)


def _tool_modules(tool: str) -> frozenset[str]:
    """The module of the contract name that a grader tool made on the implementation's side wraps, if any."""
    wrapped = standins.TOOLS[tool][1] if tool in standins.TOOLS else tool
    return frozenset(m for m in MODULES if wrapped in OWNERS[m])


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:  # no such check file (a component of a track not installed): it calls nothing
        return ""


@lru_cache(maxsize=None)
def piece_modules(piece: str) -> frozenset[str]:
    """The contract modules a stand-in piece calls through `impl` (`impl.rope.apply_rope`, `impl.attention`)."""
    try:
        source = (standins.FOLDER / f"{piece}.py").read_text(encoding="utf-8")
    except OSError:  # not shipped (a student release)
        return frozenset()
    return frozenset(m for m in re.findall(r"\bimpl\.(\w+)", source) if m in MODULES)


def sibling_imports(path: Path) -> frozenset[str]:
    """The contract modules a submission's file imports (`from .rope import ...`, `from . import vit`,
    `from attention import ...`), anywhere in it; none where it cannot be read or parsed."""
    try:
        source = read_file(path)
    except (UnreadableFile, OSError):
        return frozenset()
    return _imports_of(source)


@lru_cache(maxsize=512)
def _imports_of(source: bytes) -> frozenset[str]:
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.module:
                modules.add(node.module.split(".")[0])
            if node.level and not node.module:
                modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.Import):
            modules |= {alias.name.split(".")[0] for alias in node.names}
    return frozenset(modules) & frozenset(MODULES)
