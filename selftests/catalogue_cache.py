"""A result cache for grading the project's own bug catalogue and alternatives: never for students.

The grader's key (grader/engine/cache.py) covers every file of a submission,
since any file can run while any component is graded: one student's file must
never decide another's score. The catalogue is the project's own code: each
bug an edit of the reference's code for one component, written to be caught by
its checks, never to reach another component's. Graded with the grader's key
each of its 650 bugs would be graded in full (minutes more for every run of the
selftests); this key, the grader's before issue 29, leaves out what a
component's checks replace with stand-ins (the bodies of contract functions of
other components, where called by name) and the sibling files it does not
import, so that a bug's folder repeats the reference's results for the other
components. It trusts the code it keys: a file that reaches another component's
code in another way than these (a helper class's method with the short name of
a contract method, a file read and run by path) is keyed wrongly. That is why
the grader no longer uses it.
"""
from __future__ import annotations

import ast
import hashlib
from functools import lru_cache
from pathlib import Path

from grader.contract import OWNERS, component_modules
from grader.engine.cache import ResultCache, _tree, grader_fingerprint, modules_read
from grader.source import UnreadableFile, read_file


class CatalogueCache(ResultCache):
    """ResultCache keyed by the code a component's checks were meant to reach (see the module docstring)."""

    def key(self, folder: str | Path, component: str, checks_dir: str | Path, settings: str) -> str:
        digest = hashlib.sha256(f"{grader_fingerprint(str(checks_dir))}|{component}|{settings}".encode())
        own = component_modules(component)
        for module in own:
            digest.update(f"|{module}:".encode())
            digest.update(b"\0".join(_code_of(Path(folder) / f"{module}.py", module, component)))
        for module in modules_read(folder, component):
            if module not in own:
                digest.update(f"|sibling {module}:".encode() + _tree(Path(folder) / f"{module}.py"))
        return digest.hexdigest()


def _code_of(path: Path, module: str, component: str) -> list[bytes]:
    """The file's statements, those defining a contract function another component owns (called by name only:
    a stand-in replaces it while `component` is graded) left out."""
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
    """The file's statements as (name of the function defined or None, syntax tree dump), and the used names."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    used = frozenset(n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(tree)
                     if isinstance(n, (ast.Name, ast.Attribute)) and id(n) not in called)
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
