"""The structure of Python source the grader reads: where each definition is, what a stub holds, docstrings.

Shared by the drills, the release, the pristine stubs and the notebooks, so
that "a stub" means one thing everywhere.
"""
from __future__ import annotations

import ast
from typing import Iterator

DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def start_line(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def definition_spans(source: str) -> dict[str, tuple[int, int]]:
    """name -> (first line, last line), 1-based and inclusive, of top-level defs, classes and methods."""
    spans: dict[str, tuple[int, int]] = {}
    for node in ast.parse(source).body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        spans[node.name] = (start_line(node), node.end_lineno or node.lineno)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    spans[f"{node.name}.{item.name}"] = (start_line(item), item.end_lineno or item.lineno)
    return spans


def definition_source(source: str, name: str) -> str | None:
    """The source of one function, class or method (`Class.method`) of a module; None if it has none."""
    span = definition_spans(source).get(name)
    if span is None:
        return None
    lines = source.splitlines()[span[0] - 1:span[1]]
    indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
    return "\n".join(l[indent:] for l in lines)


def is_stub_statement(node: ast.stmt) -> bool:
    """`pass`, `...`, `super().__init__(...)` or `raise NotImplementedError(...)`: what a stub holds."""
    if isinstance(node, ast.Pass):
        return True
    if isinstance(node, ast.Expr):
        value = node.value
        if isinstance(value, ast.Constant):
            return value.value is Ellipsis or isinstance(value.value, str)
        return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "__init__"
                and isinstance(value.func.value, ast.Call) and isinstance(value.func.value.func, ast.Name)
                and value.func.value.func.id == "super")
    return raises_not_implemented(node)


def raises_not_implemented(node: ast.stmt) -> bool:
    """`raise NotImplementedError` or `raise NotImplementedError(...)`."""
    if not isinstance(node, ast.Raise) or node.exc is None:
        return False
    exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def unwritten(node: ast.stmt) -> bool:
    """Whether a def or class holds nothing but its stub: docstrings, `raise NotImplementedError`, ..."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return all(is_stub_statement(s) for s in node.body)
    if isinstance(node, ast.ClassDef):
        return all(unwritten(s) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) else is_stub_statement(s)
                   for s in node.body)
    return False


def docstring_of(node: ast.AST) -> ast.Expr | None:
    """The docstring statement of a module, class or function (its first statement, a string), else None."""
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            return first
    return None


def documented(tree: ast.AST) -> Iterator[tuple[ast.AST, ast.Expr]]:
    """(node, its docstring statement) for the module and every class and function in it that has one."""
    for node in ast.walk(tree):
        doc = docstring_of(node)
        if doc is not None:
            yield node, doc


def docstring_lines(tree: ast.Module) -> list[tuple[int, int]]:
    """(first, last) line, 1-based and inclusive, of every docstring in the module."""
    return [(doc.lineno, doc.end_lineno or doc.lineno) for _, doc in documented(tree)]


def without_docstrings(tree: ast.AST) -> ast.AST:
    """`tree` with every docstring statement dropped (a body left empty gets `pass`), in place."""
    for node, _ in list(documented(tree)):
        node.body = node.body[1:] or [ast.Pass()]
    return tree


def code_without_docstrings(source: str) -> str:
    """The module's code as an AST dump, docstrings (and, being outside the AST, comments) left out.

    Two sources with the same result differ only in their words: a stub and its translation.
    """
    return ast.dump(without_docstrings(ast.parse(source)))
