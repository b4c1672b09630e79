"""The "from scratch" rule: find library calls that would skip an exercise, by reading the source.

Nothing of the submission runs here: its files are parsed with `ast`. Imports
are followed (`import torch.nn.functional as F`, `from torch.nn import
MultiheadAttention as M`, module-level aliases such as `sdpa = F.scaled_dot_product_attention`,
and `getattr(F, "scaled_dot_product_attention")`) so that each use resolves to
a dotted name that can be compared with the forbidden ones in course.yml. A method called on a value
(`x.softmax(-1)`) reads as `torch.Tensor.softmax`, so course.yml can forbid a method spelling too.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..contract import OWNERS
from ..text import Phrase


@dataclass(frozen=True)
class ForbiddenUse:
    file: str
    line: int
    where: str  # the function or method that uses it
    name: str  # the forbidden dotted name it resolves to

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.where} uses {self.name}"

    def phrase(self) -> str:
        """Its line in the from-scratch check's message (grader.text.Phrase)."""
        return Phrase("  {file}:{line} in {where} uses {name}", file=self.file, line=self.line, where=self.where,
                    name=self.name)


class _Resolver(ast.NodeVisitor):
    """Maps local names to the dotted names they stand for."""

    def __init__(self) -> None:
        self.aliases: dict[str, str] = {}

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                top = alias.name.split(".")[0]
                self.aliases[top] = top

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level or not node.module:
            return
        for alias in node.names:
            self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"

    def resolve(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            base = self.resolve(node.args[0])
            return f"{base}.{node.args[1].value}" if base else None
        return None

    def method(self, node: ast.AST) -> str | None:
        """`torch.Tensor.softmax` for `x.softmax` or `getattr(x, "softmax")` when `x` is a value, not an import."""
        if isinstance(node, ast.Attribute) and self.resolve(node.value) is None:
            return f"torch.Tensor.{node.attr}"
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
                and self.resolve(node.args[0]) is None):
            return f"torch.Tensor.{node.args[1].value}"
        return None


def _canonical(name: str) -> str:
    """`torch.nn.modules.activation.MultiheadAttention`-style paths and `torch.nn.F` spellings, folded."""
    for module in ("activation", "transformer", "loss"):
        name = name.replace(f"torch.nn.modules.{module}.", "torch.nn.")
    return name


def _matches(name: str, forbidden: list[str]) -> str | None:
    name = _canonical(name)
    for banned in forbidden:
        if name == banned or name.startswith(banned + "."):
            return banned
    return None


def _owned_nodes(tree: ast.Module, module: str, component: str) -> list[tuple[str, ast.AST]]:
    """The functions, methods and classes of `module` whose code belongs to `component`."""
    wanted = [q for q, owners in OWNERS[module].items() if component in owners]
    found: list[tuple[str, ast.AST]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in wanted:
                found.append((node.name, node))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    qualname = f"{node.name}.{getattr(item, 'name', '')}"
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and qualname in wanted:
                        found.append((qualname, item))
    return found


@lru_cache(maxsize=64)
def _parsed(text: str, filename: str) -> ast.Module:
    """A file's syntax tree, parsed once per process (the components of one file read it again and again)."""
    return ast.parse(text, filename=filename)


@lru_cache(maxsize=64)
def _resolved(text: str, filename: str) -> tuple[ast.Module, _Resolver]:
    """The tree and what its names stand for: imports anywhere in it, and module-level aliases
    (sdpa = F.scaled_dot_product_attention)."""
    tree = _parsed(text, filename)
    resolver = _Resolver()
    resolver.visit(tree)
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            target = resolver.resolve(node.value)
            if target:
                resolver.aliases[node.targets[0].id] = target
    return tree, resolver


def forbidden_uses(folder: str | Path, component: str, forbidden: list[str]) -> list[ForbiddenUse]:
    """Every use of a forbidden name inside the component's own code in `folder`."""
    uses: list[ForbiddenUse] = []
    for module in OWNERS:
        if not any(component in owners for owners in OWNERS[module].values()):
            continue
        path = Path(folder) / f"{module}.py"
        try:
            tree, resolver = _resolved(path.read_text(), str(path))
        except (OSError, SyntaxError, ValueError):
            continue  # a missing or broken file is reported by the loader
        for where, owned in _owned_nodes(tree, module, component):
            for node in ast.walk(owned):
                name = resolver.resolve(node) if isinstance(node, (ast.Name, ast.Attribute, ast.Call)) else None
                name = name or resolver.method(node)  # a method of a tensor: x.softmax(-1)
                banned = _matches(name, forbidden) if name else None
                if banned:
                    uses.append(ForbiddenUse(path.name, node.lineno, where, banned))
    unique = {(u.file, u.line, u.name): u for u in uses}
    return sorted(unique.values(), key=lambda u: (u.file, u.line))


def not_started(folder: str | Path, component: str) -> list[str]:
    """The component's functions that still only raise NotImplementedError (untouched stubs)."""
    untouched = []
    for module in OWNERS:
        if not any(component in owners for owners in OWNERS[module].values()):
            continue
        path = Path(folder) / f"{module}.py"
        try:
            tree = _parsed(path.read_text(), str(path))
        except (OSError, SyntaxError, ValueError):
            continue
        for where, node in _owned_nodes(tree, module, component):
            functions = [node] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else [
                n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
            for function in functions:
                last = function.body[-1] if function.body else None
                if (isinstance(last, ast.Raise) and isinstance(last.exc, ast.Call)
                        and getattr(last.exc.func, "id", "") == "NotImplementedError"):
                    untouched.append(where if isinstance(node, ast.FunctionDef) else f"{where}.{function.name}")
    return untouched
