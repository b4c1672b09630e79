"""Babel extractors (babel.cfg names them): course.yml's titles and hint ladders, and the checks' sentences.

Each course.yml text becomes a catalogue entry whose message context is its
component's or assignment's id (`grader.i18n.course_context`), so that the
translation is keyed by id and an English edit shows up in `pybabel update` as a
changed entry. A known mistake's sentence (tests/checklib/catalogue.py) gets its
id as context, as a failure names it by id. The checks' messages get the context
`grader.check_text.CONTEXT` (grader/check_text.py translates them): the texts
that fill a mistake's fields, each hint, and each part of a failing check's
first line that a check words, the call it describes (`what`) and the problem
(`fail(what, problem)`, an AssertionError's text), read from the checks' source: f-strings become templates whose other
values are `{fields}`, a name stands for the texts assigned to it, a function
called for what it returns, a field for the texts passed to it. Texts without an
English word (`causal_mask({q_len}, {k_len})`) are left out. Only Babel's
extraction imports this module.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import ast
import io
import re
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
    """Yield the check texts of one file: every known mistake's sentence and what fills its fields (a module of
    tests/checklib/mistakes/: the entries of its component, or GENERAL's), or each hint and each text of a
    failing check's first line; for a grader module (the training tasks), its texts marked for gettext as well."""
    from .check_text import CONTEXT

    path = Path(getattr(fileobj, "name", ""))
    if path.parent.name == "mistakes" and path.parent.parent.name == "checklib":  # one module of mistakes
        if path.stem == "__init__":
            return
        from .checks_library import checklib

        catalogue = checklib("catalogue", f"mistakes.{path.stem}").catalogue  # declaring the entries registers them
        # a module declares its component's entries
        component = catalogue.GENERAL if path.stem == "general" else path.stem
        for entry in catalogue.CATALOGUE.values():
            if entry.component == component:  # keyed by its id: the id is what a failure carries
                yield 0, "pgettext", (entry.id, entry.sentence), []
        tree = ast.parse(path.read_text(encoding="utf-8"))
        texts = _Texts(tree, {})
        for node in ast.walk(tree):  # what fills a sentence's field: bind(..., order="..."), ENTRY.text(fix="...")
            if isinstance(node, ast.Call) and _callee(node) in ("bind", "text"):
                for text in (t for k in node.keywords if k.arg for t in texts(k.value)):
                    if has_prose(text):
                        yield node.lineno, "pgettext", (CONTEXT, text), []
        return
    data = fileobj.read()
    if "tests" not in path.parts:  # a grader module that words a part of the checks' messages: its marked texts too
        from babel.messages.extract import extract_python

        yield from extract_python(io.BytesIO(data), keywords, comment_tags, options)
    tree = ast.parse(data.decode("utf-8"))
    constants = {target.id: text for node in tree.body if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)
                 for text in [_text(node.value, {})] if text is not None}
    texts = _Texts(tree, constants)
    for node in ast.walk(tree):  # hint=..., and what is assigned to a name that says hint (hint = ..., MASK_HINT)
        if isinstance(node, ast.keyword) and node.arg == "hint":
            value = node.value
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and "hint" in t.id.lower()
                                                  for t in node.targets):
            value = node.value
        else:
            continue
        for text in texts(value):
            if text:
                yield value.lineno, "pgettext", (CONTEXT, text), []
    parts = list(_message_parts(tree, _signatures(tree, path)))
    for value in parts + _field_values(tree, parts):
        for text in texts(value):
            if has_prose(text):
                yield value.lineno, "pgettext", (CONTEXT, text), []
    for node in ast.walk(tree):  # every text a check words with its fields (grader/text.py Phrase): its template,
        if not (isinstance(node, ast.Call) and _callee(node) == "Phrase"):  # and the texts its fields are given
            continue
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) and \
                has_prose(node.args[0].value):
            yield node.lineno, "pgettext", (CONTEXT, node.args[0].value), []
        for text in (t for keyword in node.keywords for t in texts(keyword.value)):
            if " " in text and has_prose(text):  # (a word alone is code)
                yield node.lineno, "pgettext", (CONTEXT, text), []


# The parameters through which the checks word a failing check's first line ("<what>: <problem>"): the call
# described (`what=`, e.g. "apply_mask(scores (4, 6), mask (4, 6)) where the mask is False") and, where a
# check words it itself, what went wrong (`fail(what, problem)`).
PARTS = ("what", "problem")


def _signatures(tree: ast.Module, path: Path) -> dict[str, dict[str, tuple[int, int]]]:
    """function name -> {part: (its positional index (-1: keyword only), the number of positional parameters)}
    for the functions of this file and of tests/checklib/ that take a `what` or `problem` parameter."""
    trees = [tree]
    checklib = path.resolve().parent if path.parent.name == "checklib" else path.resolve().parent / "checklib"
    for other in sorted([*checklib.glob("*.py"), *checklib.glob("mistakes/*.py")]) if checklib.is_dir() else []:
        if other.resolve() != path.resolve():
            trees.append(ast.parse(other.read_text(encoding="utf-8")))
    found: dict[str, dict[str, tuple[int, int]]] = {}
    for module in trees:
        for node in ast.walk(module):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                positional = [a.arg for a in node.args.posonlyargs + node.args.args]
                every = positional + [a.arg for a in node.args.kwonlyargs]
                parts = {part: (positional.index(part) if part in positional else -1, len(positional))
                         for part in PARTS if part in every}
                if parts:
                    found.setdefault(node.name, parts)
    return found


def _callee(node: ast.Call) -> str | None:
    return node.func.id if isinstance(node.func, ast.Name) else \
        node.func.attr if isinstance(node.func, ast.Attribute) else None


def _message_parts(tree: ast.Module, signatures: dict[str, dict[str, tuple[int, int]]]) -> Iterator[ast.expr]:
    """The expressions a file passes as a message's call or problem (for a name: every value assigned to it
    in the file), the texts of the AssertionErrors (and `...Failed` errors) it raises, its asserts' messages,
    and what its `describe` methods return (tests/checklib/training/tiny_lm.py's task, shown in a check's call)."""
    passed: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = _callee(node)
            if func == "AssertionError" or (func or "").endswith("Failed"):  # the checks' own failures
                passed += node.args[:1]
            for part, (index, count) in signatures.get(func, {}).items():
                if any(isinstance(arg, ast.Starred) for arg in node.args):  # f(*args, what): count from the end
                    index = len(node.args) - (count - index) if 0 <= index else -1
                if 0 <= index < len(node.args) and not isinstance(node.args[index], ast.Starred):
                    passed.append(node.args[index])
            passed += [k.value for k in node.keywords if k.arg in PARTS]
            if any(k.arg in PARTS for k in node.keywords):  # the function it calls: what that returns is shown
                called = {a.id for a in node.args if isinstance(a, ast.Name)}
                passed += [value for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in called
                           for value in _returns(f) if isinstance(value, ast.JoinedStr)]
        elif isinstance(node, ast.Assert) and node.msg is not None:
            passed.append(node.msg)
        elif isinstance(node, ast.FunctionDef) and node.name in ("describe", "shown"):  # a task's, a value's
            passed += _returns(node)
    names = {node.id for value in passed for node in ast.walk(value) if isinstance(node, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id in names for t in targets):
                passed.append(node.value)
    yield from (value for value in passed if not isinstance(value, ast.Name))


def _returns(function: ast.AST) -> list[ast.expr]:
    """What a function returns (every `return` with a value in it, nested functions' too)."""
    return [node.value for node in ast.walk(function) if isinstance(node, ast.Return) and node.value is not None]


def _field_values(tree: ast.Module, parts: list[ast.expr]) -> list[ast.expr]:
    """The texts given to a parameter that a message's f-string shows as a field (`f"the {phase} of ..."`):
    the arguments of this file's calls of the function and the values of its `pytest.mark.parametrize`; and
    what a function of the file returns where a field calls it (`f"... {span(start, stop)} ..."`)."""
    shown = [node.value for part in parts for node in ast.walk(part) if isinstance(node, ast.FormattedValue)]
    shown += [keyword.value for part in parts for node in ast.walk(part)  # Phrase("the {phase} of ...", phase=phase)
              if isinstance(node, ast.Call) and _callee(node) == "Phrase" for keyword in node.keywords]
    fields = {value.id for value in shown if isinstance(value, ast.Name)}
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    called = {value.func.id for value in shown if isinstance(value, ast.Call) and isinstance(value.func, ast.Name)}
    found: list[ast.expr] = [value for f in functions if f.name in called  # f"... {span(start, stop)} ..."
                             for value in _returns(f)]
    for function in functions:
        positional = [a.arg for a in function.args.posonlyargs + function.args.args]
        shown = fields & set(positional + [a.arg for a in function.args.kwonlyargs])
        if not shown:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _callee(node) == function.name:
                found += [arg for i, arg in enumerate(node.args) if i < len(positional) and positional[i] in shown]
                found += [k.value for k in node.keywords if k.arg in shown]
        for decorator in function.decorator_list:
            if isinstance(decorator, ast.Call) and _callee(decorator) == "parametrize" and \
                    len(decorator.args) >= 2 and isinstance(decorator.args[0], ast.Constant) and \
                    isinstance(decorator.args[1], (ast.List, ast.Tuple)):
                names = [n.strip() for n in str(decorator.args[0].value).split(",")]
                for row in decorator.args[1].elts:
                    values = row.elts if isinstance(row, (ast.Tuple, ast.List)) and len(names) > 1 else [row]
                    found += [v for name, v in zip(names, values) if name in shown]
    return [value for value in found if isinstance(value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.IfExp))]


class _Texts:
    """The texts an expression may evaluate to: each branch of a conditional and each side of an `or`, the
    sums of their parts, a name's values (a module-level string, or each one assigned to it in the file),
    what a function of the file returns, an item of a `str.join`, an f-string's other values as `{fields}`
    (grader/check_text.py matches them filled in)."""

    LIMIT = 16  # variants of one expression at most

    def __init__(self, tree: ast.Module, constants: dict[str, str]) -> None:
        self.constants = constants
        self.assigned: dict[str, list[ast.expr]] = {}
        self.returned = {node.name: _returns(node) for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.assigned.setdefault(node.targets[0].id, []).append(node.value)
            elif isinstance(node, ast.For) and isinstance(node.target, ast.Tuple) and \
                    isinstance(node.iter, (ast.Tuple, ast.List)):  # for order, words in ((..., "..."), ...)
                for row in node.iter.elts:
                    if isinstance(row, ast.Tuple) and len(row.elts) == len(node.target.elts):
                        for name, value in zip(node.target.elts, row.elts):
                            if isinstance(name, ast.Name):
                                self.assigned.setdefault(name.id, []).append(value)

    def __call__(self, node: ast.expr, depth: int = 0) -> list[str]:
        if depth > 8:
            return []
        if isinstance(node, ast.Constant):
            return [node.value] if isinstance(node.value, str) else []
        if isinstance(node, ast.Name):
            if node.id in self.constants:
                return [self.constants[node.id]]
            return [t for value in self.assigned.get(node.id, []) for t in self(value, depth + 1)][:self.LIMIT]
        if isinstance(node, ast.IfExp):
            return (self(node.body, depth + 1) + self(node.orelse, depth + 1))[:self.LIMIT]
        if isinstance(node, ast.BoolOp):
            return [t for value in node.values for t in self(value, depth + 1)][:self.LIMIT]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and \
                any(isinstance(n, ast.Call) and _callee(n) == "Phrase" for n in ast.walk(node)):
            # a Phrase composed with another text keeps both (grader/text.py): each is rendered, so found, alone
            return (self(node.left, depth + 1) + self(node.right, depth + 1))[:self.LIMIT]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # an operand not text: a field
            left, right = (self(side, depth + 1) or [_field(side)] for side in (node.left, node.right))
            return [a + b for a in left for b in right][:self.LIMIT]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.returned:
            return [t for value in self.returned[node.func.id] for t in self(value, depth + 1)][:self.LIMIT]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join" and \
                len(node.args) == 1 and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp)):
            return self(node.args[0].elt, depth + 1)  # each item of "; ".join(f"..." for ...)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args and \
                node.func.attr in ("strip", "rstrip", "lstrip"):
            return [getattr(text, node.func.attr)() for text in self(node.func.value, depth + 1)]
        if isinstance(node, ast.Call) and _callee(node) == "Phrase" and node.args:  # a text with fields: its template
            return [node.args[0].value] if isinstance(node.args[0], ast.Constant) else []
        return []


def _field(node: ast.expr) -> str:
    """The `{field}` a value that is not text becomes: its expression's words (`{tuple_scores_shape}`)."""
    return "{" + "_".join(re.findall(r"\w+", ast.unparse(node))) + "}"


def has_prose(template: str) -> bool:
    """Whether a template holds an English word outside its fields, quotes and code: a word of letters that
    is not a call, an attribute, a keyword argument, an argument named alone (`apply_mask(scores, mask)`) or
    a CamelCase name. A call's description has one ("x after LayerNorm(...)", "apply_mask(scores (4, 6),
    mask (4, 6))"); "causal_mask({q_len}, {k_len}, device='cpu')" has none."""
    text = re.sub(r"\{[^{}]*\}|`[^`]*`|'[^']*'|\"[^\"]*\"", " ", template)
    for word in re.finditer(r"(?<![\w.])([A-Za-z]{2,})(?![\w(=.\[])", text):
        argument = re.search(r"[(\[,=] ?$", text[:word.start()]) and re.match(r" ?[,)\]]", text[word.end():])
        if not argument and not re.search(r".[A-Z]", word[1]) and word[1] not in ("True", "False", "None"):
            return True
    return False


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
