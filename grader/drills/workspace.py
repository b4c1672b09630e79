"""Build a drill workspace: the reference with the drilled components put back to their stubs.

The drilled names of a component are the public names that grader/contract.py's
OWNERS gives it. A name is one top-level function or class (`split_heads`,
`KVCache`) or one method (`MultiHeadAttention.project_qkv`). Sources are edited
with `ast` line spans, so everything else in a file stays the reference's code.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from ..contract import MODULES, OWNERS
from ..i18n import N_, _
from ..paths import SOLUTIONS
from ..syntax import definition_source, definition_spans, docstring_lines, docstring_of, unwritten

PACKAGE_INIT = "__init__.py"

# Names OWNERS shares between components, narrowed for some of them in a drill:
# (module, name) -> {component: the names actually drilled for it}. The block
# only passes the cache on to attention, so a kv_cache drill keeps a working
# TransformerBlock and drills KVCache and MultiHeadAttention.forward.
NARROWED: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {
    ("block", "TransformerBlock"): {"kv_cache": ()},
}

Edit = tuple[int, int, list[str]]  # replace lines [start, end) (0-based) with these lines

# A stub's worded steps: a docstring paragraph opened by "TODO (component), ... in words:".
# They spell out the key line, so an interview drill hides them.
# The Chinese stubs (grader/locale/zh_CN/stubs/) open it with "TODO (component)，分步说明：".
WORDED_TODO = re.compile(r'^(?P<indent>\s*)(?P<opener>[rRuU]?(?:"""|\'\'\'))?TODO \((?P<tag>[^)]*)\).*'
                         r'(?:\bin words:|分步说明[:：])\s*$')
FROM_MEMORY = N_("TODO ({tag}): write it from memory (interview mode: the steps are not shown).")


def drilled_names(module: str, components: set[str] | frozenset[str]) -> list[str]:
    """The names in `module` that a drill of `components` leaves as stubs, in contract order."""
    names: list[str] = []
    for name, owners in OWNERS[module].items():
        drilled = owners & set(components)
        if not drilled:
            continue
        narrowed = NARROWED.get((module, name), {})
        if all(c in narrowed for c in drilled):
            names += [n for c in sorted(drilled) for n in narrowed[c] if n not in names]
        elif name not in names:
            names.append(name)
    return names


def component_names(component: str) -> dict[str, list[str]]:
    """module -> the names a drill of this one component leaves as stubs (modules without any left out)."""
    return {m: names for m in MODULES if (names := drilled_names(m, {component}))}


def learners_code(source: str, name: str) -> str | None:
    """One definition of the learner's module without its docstrings (they are the stub's, not the learner's).

    None when the module does not define `name`; "" when the definition still
    holds only the stub (docstrings, `super().__init__()`, `raise NotImplementedError`).
    """
    definition = definition_source(source, name)
    if definition is None:
        return None
    tree = ast.parse(definition)
    if not tree.body or unwritten(tree.body[0]):
        return ""
    lines = definition.splitlines()
    drop: set[int] = set()  # 0-based lines that are docstring only
    for first, last in docstring_lines(tree):
        own_lines = all(not lines[i].strip() or i not in _code_lines(tree, first, last) for i in range(first - 1, last))
        if own_lines:
            drop.update(range(first - 1, last))
    return "\n".join(l for i, l in enumerate(lines) if i not in drop)


def _code_lines(tree: ast.Module, first: int, last: int) -> set[int]:
    """0-based lines in [first, last] where a statement other than the docstring there starts or ends."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and not (isinstance(node, ast.Expr) and node.lineno == first
                                               and node.end_lineno == last):
            for line in (node.lineno, node.end_lineno or node.lineno):
                if first <= line <= last:
                    lines.add(line - 1)
    return lines


def _outermost(names: list[str]) -> list[str]:
    """Drop methods whose whole class is replaced anyway."""
    return [n for n in names if "." not in n or n.split(".")[0] not in names]


def _docstring_edit(reference: ast.Module, stub: ast.Module, stub_lines: list[str]) -> list[Edit]:
    """Use the stub's module docstring (it teaches; the reference's says 'reference solution')."""
    ref_doc, stub_doc = docstring_of(reference), docstring_of(stub)
    if ref_doc is None or stub_doc is None:
        return []
    return [(ref_doc.lineno - 1, ref_doc.end_lineno, stub_lines[stub_doc.lineno - 1:stub_doc.end_lineno])]


def _import_edit(reference: ast.Module, stub: ast.Module) -> list[Edit]:
    """Add the stub's top-level imports that the reference lacks (a stub may rely on them), after its own."""
    imports = [n for n in reference.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    have = {ast.unparse(n) for n in imports}
    missing = [ast.unparse(n) for n in stub.body if isinstance(n, (ast.Import, ast.ImportFrom))
               and ast.unparse(n) not in have and not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
    if not missing or not imports:
        return []
    after = max(n.end_lineno or n.lineno for n in imports)
    return [(after, after, missing)]


def splice_stubs(reference_source: str, stub_source: str, names: list[str]) -> str:
    """The reference module with the definitions `names` replaced by the stub module's."""
    names = _outermost(names)
    ref_lines, stub_lines = reference_source.splitlines(), stub_source.splitlines()
    ref_tree, stub_tree = ast.parse(reference_source), ast.parse(stub_source)
    ref_spans, stub_spans = definition_spans(reference_source), definition_spans(stub_source)
    edits: list[Edit] = []
    for name in names:
        if name not in ref_spans or name not in stub_spans:
            where = "the reference" if name not in ref_spans else "the stubs"
            raise ValueError(f"{name} is not defined in {where}")
        (r0, r1), (s0, s1) = ref_spans[name], stub_spans[name]
        edits.append((r0 - 1, r1, stub_lines[s0 - 1:s1]))
    edits += _import_edit(ref_tree, stub_tree) + _docstring_edit(ref_tree, stub_tree, stub_lines)
    for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        ref_lines[start:end] = new
    result = "\n".join(ref_lines) + "\n"
    ast.parse(result)  # a splice must leave valid Python
    return result


def hide_worded_steps(source: str) -> str:
    """`source` with each docstring's "TODO (...), in words:" paragraph replaced by a write-it-from-memory note.

    The paragraph runs from its TODO line to the next blank line or the end of
    the docstring; the docstring's closing quotes stay. Nothing outside
    docstrings is touched.
    """
    lines = source.splitlines()
    for first, last in sorted(docstring_lines(ast.parse(source)), reverse=True):
        i = first - 1
        while i < last:
            match = WORDED_TODO.match(lines[i])
            if not match:
                i += 1
                continue
            end = i + 1  # the paragraph is lines[i:end]
            while end < last and lines[end].strip() and not lines[end].strip().startswith(('"""', "'''")):
                end += 1
            closer = ""
            if end == last and (tail := lines[last - 1].rstrip()).endswith(('"""', "'''")) and last - 1 > i:
                closer = tail[-3:]  # the docstring closes on the paragraph's last line
            note = f"{match['indent']}{match['opener'] or ''}{_(FROM_MEMORY).format(tag=match['tag'])}{closer}"
            lines[i:end] = [note]
            last -= end - i - 1
            i += 1
    result = "\n".join(lines) + ("\n" if source.endswith("\n") else "")
    ast.parse(result)
    return result


def has_reference(solutions: Path = SOLUTIONS) -> bool:
    """Whether this checkout holds the reference (a student release does not)."""
    return all((solutions / f"{m}.py").is_file() for m in MODULES)


def build_workspace(dest: Path, components: list[str], *, stubs: dict[str, str] | None = None,
                    solutions: Path = SOLUTIONS, interview: bool = False) -> bool:
    """Write the five contract files and __init__.py into `dest` (which must not exist yet).

    `stubs` (file name -> text) defaults to the pristine stubs (grader/pristine.py),
    never the learner's edited exercises/. Returns True when the workspace holds
    working code for the components not drilled (the reference is here), False
    for a student release, where the files are the stubs as they are. In an
    interview (`interview`), the stubs' worded steps are hidden (`hide_worded_steps`).
    Raises PristineStubsError, before creating `dest`, when the stubs cannot be found.
    """
    if stubs is None:
        from ..pristine import pristine_stubs

        stubs = pristine_stubs()
    working = has_reference(solutions)
    sources = {PACKAGE_INIT: stubs[PACKAGE_INIT]}
    for module in MODULES:
        stub = stubs[f"{module}.py"]
        if working:
            sources[f"{module}.py"] = splice_stubs((solutions / f"{module}.py").read_text(), stub,
                                                   drilled_names(module, set(components)))
        else:
            sources[f"{module}.py"] = stub
        if interview:
            sources[f"{module}.py"] = hide_worded_steps(sources[f"{module}.py"])
    dest.mkdir(parents=True, exist_ok=False)
    for name, source in sources.items():
        (dest / name).write_text(source)
    return working
