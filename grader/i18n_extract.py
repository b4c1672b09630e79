"""Babel extractors (babel.cfg names them): course.yml's titles and hint ladders, and the checks' sentences.

Each course.yml text becomes a catalogue entry whose message context is its
component's or assignment's id (`grader.i18n.course_context`), so that the
translation is keyed by id and an English edit shows up in `pybabel update` as a
changed entry. The checks' diagnoses (every known mistake's sentence,
tests/checklib/catalogue.py) and hints (each check's constant `hint=` text) get
the context `grader.check_text.CONTEXT`; grader/check_text.py translates them.
Only Babel's extraction imports this module.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import ast
import re
import sys
from pathlib import Path

import yaml

from .i18n import course_context

FIELDS = {"assignments": ("title",), "components": ("title", "hint", "hints")}


def extract_course(fileobj: BinaryIO, keywords, comment_tags, options) -> Iterator[tuple]:
    """Yield (line, "pgettext", (context, text), comments) for every translatable text of a course.yml."""
    root = yaml.compose(fileobj.read().decode("utf-8"))
    sections = {key.value: value for key, value in root.value}
    for section, fields in FIELDS.items():
        node = sections.get(section)
        for entry in node.value if node is not None else []:
            values = {key.value: value for key, value in entry.value}
            key = values["id"].value
            for field in fields:
                found = values.get(field)
                if found is None:
                    continue
                items = found.value if isinstance(found, yaml.SequenceNode) else [found]
                for n, item in enumerate(items, 1):
                    where = f"{section[:-1]} {key}, {field}" + (f" {n}" if field == "hints" else "")
                    yield item.start_mark.line + 1, "pgettext", (course_context(key), item.value), [where]


def extract_checks(fileobj: BinaryIO, keywords, comment_tags, options) -> Iterator[tuple]:
    """Yield the check sentences of one file: every known mistake's (mistakes.py), or each constant hint."""
    from .check_text import CONTEXT

    path = Path(getattr(fileobj, "name", ""))
    if path.name == "mistakes.py":
        tests = str(path.resolve().parent.parent)
        if tests not in sys.path:
            sys.path.insert(0, tests)
        import checklib.mistakes  # noqa: F401 - declaring the entries registers them
        from checklib.catalogue import CATALOGUE

        for entry in CATALOGUE.values():
            yield 0, "pgettext", (CONTEXT, entry.sentence), [entry.id]
        return
    tree = ast.parse(fileobj.read().decode("utf-8"))
    constants = {target.id: text for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)
                 for text in [_text(node.value, {})] if text is not None}
    for node in ast.walk(tree):  # hint=..., and what is assigned to a name that says hint (hint = ..., MASK_HINT)
        if isinstance(node, ast.keyword) and node.arg == "hint":
            value = node.value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "hint" in t.id.lower()
                                                  for t in node.targets):
            value = node.value
        else:
            continue
        text = _text(value, constants)
        if text:
            yield value.lineno, "pgettext", (CONTEXT, text), []


def _text(node: ast.AST, constants: dict[str, str]) -> str | None:
    """The string an expression of string constants, `+`, module-level string names and f-strings evaluates
    to; an f-string's other values become `{fields}` (grader/check_text.py matches them filled in)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left, constants), _text(node.right, constants)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant):
                parts.append(str(value.value))
            elif isinstance(value, ast.FormattedValue) and isinstance(value.value, ast.Name) and \
                    value.value.id in constants and value.format_spec is None:
                parts.append(constants[value.value.id])
            elif isinstance(value, ast.FormattedValue):
                parts.append("{" + "_".join(re.findall(r"\w+", ast.unparse(value.value))) + "}")
            else:
                return None
        return "".join(parts)
    return None
