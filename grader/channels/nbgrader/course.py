"""`python -m grader nbgrader DIR`: write a ready nbgrader course (config and one source notebook per assignment).

Per assignment (course.yml `assignments:`, else one holding every component),
`source/<id>/<id>.ipynb` (nbgrader schema 3):

- a locked setup cell (imports the grader, found through `DRILLS_GRADER` or an
  installed package, never a path written into the notebook; creates
  `submission/`);
- per contract file, a markdown cell from the stub's module docstring and a
  locked cell writing its header (`%%writefile submission/<file>`);
- per function or class, a markdown cell (its component, hint and docstrings,
  reStructuredText turned into Markdown) and a solution cell appending its code
  without the docstrings (`%%writefile -a`): the stub's signature and leading
  statements (`super().__init__()`), then the reference body between
  `### BEGIN SOLUTION` / `### END SOLUTION`, so the released notebook shows the
  stub (nbgrader puts `raise NotImplementedError()` there); names owned by
  components outside the assignment are written as stubs by locked cells, and
  files outside it as the exercises/ file;
- per component, a locked graded test cell (points from course.yml) whose
  value is the points earned (`grader.channels.nbgrader.notebook.grade_component`): nbgrader's
  partial credit. Hidden checks count where `DRILLS_HIDDEN_CHECKS=1`, which the
  written `nbgrader_config.py` sets for the kernels nbgrader starts (autograde);
  no `### BEGIN HIDDEN TESTS`, whose checksum nbgrader stores before removing
  the hidden part and so warns about on every autograde (nbgrader issue 1961).

nbformat is imported only here, never on the grading path.
"""
from __future__ import annotations

import argparse
import ast
import json
import re
from pathlib import Path

from ...contract import FILES, OWNERS
from ...course import load_assignments, load_course
from ...i18n import _, course_text, language
from ...paths import EXERCISES, ROOT, SOLUTIONS
from ...pristine import translate_stubs
from ..package.generated import python_string, render
from ...syntax import DEFINITIONS, documented, raises_not_implemented, start_line, without_docstrings

SUB = "submission"


def _setup_cell() -> str:
    """The notebook's first code cell (package/templates/nbgrader_setup_cell.py), its words in the language in use."""
    about = _("Setup (do not edit): imports the grader and creates the folder your code is written to.\n"
              "The grader is found in the folder named by the environment variable DRILLS_GRADER\n"
              "(the course's checkout or its student release), else as an installed package.")
    not_found = _("the grader was not found: set DRILLS_GRADER to the folder holding grader/ (the course's "
                  "checkout or release) before starting Jupyter")
    return render("nbgrader_setup_cell.py", sub=python_string(SUB),
                  about="\n# ".join(about.splitlines()),
                  not_found=json.dumps(not_found, ensure_ascii=False)[1:-1],  # the words as written, not \u escapes
                  lang=language())  # the feedback in the notebook's language, whatever the kernel's locale


def _stub_source(file: str) -> str:
    """exercises/<file> in the language in use (grader/pristine.py's translated stubs; English without one)."""
    return translate_stubs({file: (EXERCISES / file).read_text()}, language())[file]


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": locked, "task": False,
            "grade_id": grade_id}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _no_meta(grade_id: str, **_kwargs) -> dict:
    """A self-study notebook's cell metadata: none (nbgrader reads none there)."""
    return {}


def _lines(source: str) -> list[str]:
    return source.splitlines()


def _text(lines: list[str], first: int, last: int) -> list[str]:
    return lines[first - 1:last]


_DEFS = DEFINITIONS


def _strip_docstrings(source: str) -> str:
    """`source` without the docstrings of its module, classes and functions (a body left empty gets `pass`)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    drop: dict[int, str | None] = {}  # line number -> replacement (None: delete)
    for node, doc in documented(tree):
        body = node.body
        if isinstance(node, _DEFS) and doc.lineno == node.lineno:
            continue  # a one-line definition: leave it whole
        for line in range(doc.lineno, doc.end_lineno + 1):
            drop[line] = None
        if len(body) == 1 and isinstance(node, _DEFS):
            drop[doc.lineno] = " " * doc.col_offset + "pass"
    return "\n".join(repl for i, line in enumerate(lines, 1)
                     for repl in ([line] if i not in drop else [drop[i]] if drop[i] is not None else [])) + "\n"


def _docstrings(tree: ast.Module) -> dict[str, str]:
    """Docstring (cleaned) of every top-level function and class and of every method, by qualified name."""
    docs = {}
    for node in tree.body:
        if isinstance(node, _DEFS):
            docs[node.name] = ast.get_docstring(node) or ""
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        docs[f"{node.name}.{member.name}"] = ast.get_docstring(member) or ""
    return docs


_ROLE = re.compile(r":[a-z:]+:`([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")
_ALPHA_ITEM = re.compile(r"^(\s*)([a-z])\. ", re.M)


def _inline(text: str) -> str:
    """Prose (one or more lines) with reST roles and ``literals`` as Markdown code spans."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).lstrip('~')}`", text)
    text = _LITERAL.sub(lambda m: "`" + " ".join(m.group(1).split()) + "`", text)
    return _ALPHA_ITEM.sub(r"\1- \2. ", text)  # "a. ..." steps: Markdown has no lettered lists


def _markdown(doc: str) -> str:
    """A docstring's reStructuredText (the subset the stubs use) as Markdown.

    ``literal`` becomes `literal`, a `::` paragraph's indented block and any other
    indented block after a blank line become fenced code, `a.` steps become
    bullets; lists, *emphasis* and **strong** read the same in both.
    """
    lines = doc.splitlines()
    out: list[str] = []
    prose: list[str] = []
    i = 0

    def indent(line: str) -> int:
        return len(line) - len(line.lstrip())

    def flush() -> None:
        if prose:
            out.append(_inline("\n".join(prose)))
            prose.clear()

    while i < len(lines):
        line = lines[i].rstrip()
        literal = line.endswith("::")
        quoted = indent(line) >= 4 and (not prose or not prose[-1].strip()) \
            and not re.match(r"\s*([-*+]|\d+\.|[a-z]\.)\s", line)
        if not (literal or quoted):
            prose.append(line)
            i += 1
            continue
        if literal:
            text = line[:-2].rstrip()
            if text:
                prose += [text + (":" if not line[:-2].endswith(" ") else ""), ""]
            base = indent(line)
            i += 1
        else:
            base = indent(line) - 1
        block = []
        while i < len(lines) and (not lines[i].strip() or indent(lines[i]) > base):
            block.append(lines[i].rstrip())
            i += 1
        while block and not block[-1]:
            block.pop()
        while block and not block[0]:
            block.pop(0)
        if block:
            flush()
            cut = min(indent(b) for b in block if b)
            out.append("\n".join(["```text", *[b[cut:] for b in block], "```", ""]))
    flush()
    return "\n".join(out).strip()


def _head(lines: list[str], node) -> list[str]:
    """The decorators and signature of a definition (the lines before its body, less trailing blank lines)."""
    out = _text(lines, start_line(node), node.body[0].lineno - 1)
    while out and not out[-1].strip():
        out.pop()
    return out


def _plain(text: str) -> str:
    """Plain text (a course.yml hint) safe in Markdown: `*`, `_`, backticks and backslashes stay characters."""
    return re.sub(r"([*_\\`])", r"\\\1", text)


def _function(stub_lines, stub, ref_lines, ref) -> list[str]:
    """The stub's signature and leading statements (`super().__init__()`), then the reference body as the solution.

    Trees and lines are of sources without docstrings. The reference body loses
    the statements the stub already shows, so they run once.
    """
    out = _head(stub_lines, stub)
    pre = [s for s in stub.body if not raises_not_implemented(s) and not isinstance(s, ast.Pass)]
    rest, shown = list(ref.body), set()
    for stmt in pre:
        same = next((r for r in rest if ast.dump(r) == ast.dump(stmt)), None)
        if same is not None:
            rest.remove(same)
            shown.update(range(start_line(same), same.end_lineno + 1))
    for stmt in pre:
        out += _text(stub_lines, start_line(stmt), stmt.end_lineno)
    if not rest:
        return out if pre else out + [" " * (stub.col_offset + 4) + "pass"]
    indent = " " * rest[0].col_offset
    out.append(f"{indent}### BEGIN SOLUTION")
    out += [ref_lines[n - 1] for n in range(start_line(rest[0]), ref.end_lineno + 1) if n not in shown]
    out.append(f"{indent}### END SOLUTION")
    return out


def _signature_only(ref_lines, ref) -> list[str]:
    """A reference member the stub lacks: its signature visible, its body the solution."""
    indent = " " * ref.body[0].col_offset
    return [*_head(ref_lines, ref), f"{indent}### BEGIN SOLUTION",
            *_text(ref_lines, ref.body[0].lineno, ref.end_lineno), f"{indent}### END SOLUTION"]


def _class(stub_lines, stub, ref_lines, ref, is_solution) -> list[str]:
    members = stub.body
    out = _head(stub_lines, stub)
    ref_methods = {n.name: n for n in ref.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen = set()
    for k, node in enumerate(members):
        if k:
            out.append("")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ref_methods \
                and is_solution(f"{stub.name}.{node.name}"):
            seen.add(node.name)
            out += _function(stub_lines, node, ref_lines, ref_methods[node.name])
        else:
            seen.add(getattr(node, "name", None))
            out += _text(stub_lines, start_line(node), node.end_lineno)
    for name, node in ref_methods.items():
        if name not in seen and is_solution(f"{stub.name}.{name}"):
            out += ["", *_signature_only(ref_lines, node)]
    return out


def _code_cell(source: str, meta: dict):
    import nbformat

    return nbformat.v4.new_code_cell(source, metadata=meta)


def _md(text: str):
    import nbformat

    return nbformat.v4.new_markdown_cell(text)


def _owners(module: str, name: str) -> frozenset[str]:
    owners = OWNERS.get(module, {})
    if name in owners:
        return owners[name]
    cls = name.split(".")[0]
    found = owners.get(cls)
    if found is not None:
        return found
    return frozenset().union(*[v for k, v in owners.items() if k.startswith(cls + ".")]) if cls else frozenset()


def _file_cells(file: str, selected: set[str], course, study: str | None = None) -> tuple[list, list[str]]:
    """Cells writing one contract file; also the ids of the solution cells.

    `study` (the self-study notebooks, grader/channels/nbgrader/study.py): no nbgrader metadata; "stub": every
    definition as the stub's code; "reference": the reference's code where nbgrader's notebook has a solution,
    without the solution markers (what a selftest grades for full marks).
    """
    meta = _no_meta if study else _meta
    module = file.removesuffix(".py")
    stub_src = _stub_source(file)
    ref_src = (SOLUTIONS / file).read_text()
    doc = ast.get_docstring(ast.parse(stub_src)) or ""
    stub_docs, ref_docs = _docstrings(ast.parse(stub_src)), _docstrings(ast.parse(ref_src))
    # the code cells hold code only: every docstring is shown as Markdown instead
    stub_src, ref_src = _strip_docstrings(stub_src), _strip_docstrings(ref_src)
    stub_tree, ref_tree = ast.parse(stub_src), ast.parse(ref_src)
    stub_lines, ref_lines = _lines(stub_src), _lines(ref_src)
    target = f"{SUB}/{file}"
    cells = [_md(f"## `{file}`\n\n{_markdown(doc)}" if doc else f"## `{file}`")]
    defs = _DEFS
    body = stub_tree.body
    first_def = next((i for i, n in enumerate(body) if isinstance(n, defs)), len(body))
    header_nodes = body[:first_def]
    header = _text(stub_lines, start_line(header_nodes[0]), header_nodes[-1].end_lineno) if header_nodes else []
    stub_imports = {ast.dump(n) for n in header_nodes if isinstance(n, (ast.Import, ast.ImportFrom))}
    for node in ref_tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) not in stub_imports:
            header += _text(ref_lines, node.lineno, node.end_lineno)
    cells.append(_code_cell(f"%%writefile {target}\n" + "\n".join(header) + "\n",
                            meta(f"{module}_header", locked=True)))
    ref_defs = {n.name: n for n in ref_tree.body if isinstance(n, defs)}
    solution_ids = []
    done = set()

    def is_solution(name: str) -> bool:
        return bool(_owners(module, name) & selected)

    def component_note(name: str) -> str:
        owners = [c for c in course.components if c.id in _owners(module, name)]
        parts = [_("**{title}** (`{id}`, {points:g} points)").format(title=course_text(c.id, c.title), id=c.id,
                                                                    points=c.points) if c.id in selected else
                 _("**{title}** (`{id}`, not graded in this assignment: when the code that uses it is graded, "
                   "the grader's own version stands in for it)").format(title=course_text(c.id, c.title), id=c.id)
                 for c in owners]
        hints = [_("*Hint ({id}):* {hint}").format(id=c.id, hint=_plain(course_text(c.id, c.hint_ladder[0])))
                 for c in owners if c.id in selected and c.hint_ladder]
        return "\n\n".join([f"### `{name}`: " + ", ".join(parts), *hints, *docs_of(name, stub_docs)])

    def docs_of(name: str, docs: dict[str, str]) -> list[str]:
        """The docstrings of `name` and of its methods, as Markdown."""
        out = [_markdown(docs[name])] if docs.get(name) else []
        for member, text in docs.items():
            if member.startswith(name + ".") and text:
                out += [f"#### `{member}`", _markdown(text)]
        return out

    for node in body[first_def:]:
        if not isinstance(node, defs):
            cells.append(_code_cell(f"%%writefile -a {target}\n\n" + "\n".join(
                _text(stub_lines, start_line(node), node.end_lineno)) + "\n", meta(f"{module}_{node.lineno}", locked=True)))
            continue
        ref = ref_defs.get(node.name)
        done.add(node.name)
        members = [node.name] + [f"{node.name}.{m.name}" for m in getattr(node, "body", [])
                                 if isinstance(node, ast.ClassDef) and isinstance(m, ast.FunctionDef)]
        solution = ref is not None and any(is_solution(m) for m in members) and study != "stub"
        if isinstance(node, ast.ClassDef) and ref is not None and solution:
            code = _class(stub_lines, node, ref_lines, ref, is_solution)
        elif solution:
            code = _function(stub_lines, node, ref_lines, ref)
        else:
            code = _text(stub_lines, start_line(node), node.end_lineno)
        cell_id = f"{module}_{node.name}"
        cells.append(_md(component_note(node.name)))
        source = f"%%writefile -a {target}\n\n\n" + "\n".join(_unmarked(code) if study else code) + "\n"
        cells.append(_code_cell(source, meta(cell_id, solution=True) if solution else meta(cell_id, locked=True)))
        if solution:
            solution_ids.append(cell_id)
    for name, node in ref_defs.items():  # reference helpers the stub lacks
        if name not in done and not name.startswith("__") and study != "stub":
            cell_id = f"{module}_{name}"
            code = _signature_only(ref_lines, node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else ["### BEGIN SOLUTION", *_text(ref_lines, start_line(node), node.end_lineno), "### END SOLUTION"]
            cells.append(_md("\n\n".join([f"### `{name}`", *docs_of(name, ref_docs)])))
            cells.append(_code_cell(f"%%writefile -a {target}\n\n\n" + "\n".join(_unmarked(code) if study else code)
                                    + "\n", meta(cell_id, solution=True)))
            solution_ids.append(cell_id)
    return cells, solution_ids


def _unmarked(code: list[str]) -> list[str]:
    """Code lines without nbgrader's solution markers."""
    return [line for line in code if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]


def _test_cell(component) -> str:
    # Hidden checks count where DRILLS_HIDDEN_CHECKS=1 (nbgrader_config.py), not through
    # `### BEGIN HIDDEN TESTS`: nbgrader warns on every autograde of such a cell (issue 1961).
    return f'from grader.channels.nbgrader.notebook import grade_component\n\ngrade_component("{component.id}")\n'


def _intro(title: str, how: str, components) -> str:
    """A notebook's first cell: its title, the kit's one-line summary, how to work in it, the points table."""
    return (f"# {title}\n\n{_stub_source('__init__.py').split(chr(10) * 2, 1)[0].strip(chr(34))}\n\n{how}\n\n"
            + "| {} | {} |\n|---|---|\n".format(_("component"), _("points"))
            + "\n".join(f"| {course_text(c.id, c.title)} (`{c.id}`) | {c.points:g} |" for c in components))


def write_notebook(nb, path: Path) -> Path:
    """Validate `nb` and write it to `path` (its folder made)."""
    import nbformat

    nbformat.validate(nb)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return path


def nbformat_missing(what: str) -> bool:
    """Whether nbformat cannot be imported (then says so, naming `what` needs it)."""
    try:
        import nbformat  # noqa: F401
    except ImportError:
        print(f"{what} needs nbformat: pip install 'transformer-drills[nbgrader]'", flush=True)
        return True
    return False


def build_notebook(assignment):
    import nbformat

    course = load_course()
    selected = set(assignment.components)
    components = [c for c in course.components if c.id in selected]
    files = []
    for component in components:
        for file in FILES[component.id]:
            if file not in files:
                files.append(file)
    others = [f for f in dict.fromkeys(f for fs in FILES.values() for f in fs) if f not in files]
    intro = _intro(course_text(assignment.id, assignment.title), _(
        "Fill in every cell that says `# YOUR CODE HERE` (replace `raise NotImplementedError()` with your "
        "code, keeping the indentation). Each code cell appends your code to a file in `submission/`; "
        "run the notebook top to bottom (Restart & Run All) after any edit. The cells under *Check your "
        "work* grade each component; their value is the points earned."), components)
    cells = [_md(intro), _code_cell(_setup_cell(), _meta("setup", locked=True))]
    for file in files:
        file_cells, _ids = _file_cells(file, selected, course)
        cells += file_cells
    for file in others:
        cells.append(_code_cell(f"%%writefile {SUB}/{file}\n# " + _("Not part of this assignment (do not edit): the "
                                "exercise file's stubs, without their docstrings.") + "\n" + _without_docstrings(file),
                                _meta(f"{file.removesuffix('.py')}_given", locked=True)))
    cells.append(_md("## " + _("Check your work") + "\n\n" + _(
        "Each cell below grades one component with the course's checks, prints every check's outcome and message, "
        "and shows the points earned (hidden checks count only when the course staff grade).")))
    for component in components:
        cells.append(_md("### " + _("{title} (`{id}`, {points:g} points)").format(
            title=course_text(component.id, component.title), id=component.id, points=component.points)))
        cells.append(_code_cell(_test_cell(component), _meta(f"test_{component.id}", grade=True, locked=True,
                                                            points=component.points)))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write_course(out: Path, root: Path = ROOT) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(render("nbgrader_config.py", course=python_string(load_course().name), root=python_string(str(root))))
    return [write_notebook(build_notebook(assignment), out / "source" / assignment.id / f"{assignment.id}.ipynb")
            for assignment in load_assignments()]


def _nbgrader(args: argparse.Namespace) -> int:
    if nbformat_missing("the nbgrader channel"):
        return 2
    for path in write_course(Path(args.dir), Path(args.root).resolve()):
        print(_("wrote {path}").format(path=path))
    print(_("wrote {path}; next: cd {dir} && nbgrader generate_assignment ID").format(
        path=Path(args.dir) / "nbgrader_config.py", dir=args.dir))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("nbgrader", help=_("write an nbgrader course (config and source notebooks)"))
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--root", default=str(ROOT),
                        help=_("the grader nbgrader_config.py points DRILLS_GRADER at (default: this checkout; an exported DRILLS_GRADER overrides)"))
    parser.set_defaults(func=_nbgrader)


def _without_docstrings(file: str) -> str:
    """The exercise file's code without its docstrings (its teaching belongs to another assignment's notebook)."""
    return ast.unparse(without_docstrings(ast.parse((EXERCISES / file).read_text()))) + "\n"
