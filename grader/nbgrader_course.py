"""`python -m grader nbgrader DIR`: write a ready nbgrader course (config and one source notebook per assignment).

Per assignment (course.yml `assignments:`, else one holding every component),
`source/<id>/<id>.ipynb` (nbgrader schema 3):

- a locked setup cell (makes the grader importable, creates `submission/`);
- per contract file, a markdown cell from the stub's module docstring and a
  locked cell writing its header (`%%writefile submission/<file>`);
- per function or class, a markdown cell and a solution cell appending it
  (`%%writefile -a`): the stub's signature and docstring, then the reference
  body between `### BEGIN SOLUTION` / `### END SOLUTION`, so the released
  notebook shows the stub (nbgrader puts `raise NotImplementedError()` there);
  names owned by components outside the assignment are written as stubs by
  locked cells, and files outside it as the exercises/ file;
- per component, a locked graded test cell (points from course.yml) whose
  value is the points earned (`grader.notebook.grade_component`): nbgrader's
  partial credit. Hidden checks count only inside `### BEGIN HIDDEN TESTS`.

nbformat is imported only here, never on the grading path.
"""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

from .contract import FILES, OWNERS
from .course import ROOT, load_assignments, load_course

SUB = "submission"
CONFIG = '''\
# nbgrader configuration written by `python -m grader nbgrader` (transformer-drills).
c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course!r}
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "submission"]
# one grading run of every component happens in the first test cell
c.Execute.timeout = 600
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
'''

SETUP = '''\
# Setup (do not edit): makes the grader importable and creates the folder your code is written to.
import os
import sys

DRILLS_ROOT = os.environ.get("DRILLS_ROOT", {root!r})
if os.path.isdir(DRILLS_ROOT) and DRILLS_ROOT not in sys.path:
    sys.path.insert(0, DRILLS_ROOT)
os.makedirs({sub!r}, exist_ok=True)
open(os.path.join({sub!r}, "__init__.py"), "w").close()
'''


def _meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"schema_version": 3, "grade": grade, "solution": solution, "locked": locked, "task": False,
            "grade_id": grade_id}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _lines(source: str) -> list[str]:
    return source.splitlines()


def _start(node: ast.AST) -> int:
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno, *[d.lineno for d in decorators]])


def _docstring_end(node) -> int | None:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].end_lineno
    return None


def _text(lines: list[str], first: int, last: int) -> list[str]:
    return lines[first - 1:last]


def _is_stub_raise(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _function(stub_lines, stub, ref_lines, ref) -> list[str]:
    """The stub's signature and docstring, its leading statements, then the reference body as the solution."""
    doc_end = _docstring_end(stub)
    head_end = doc_end if doc_end else stub.body[0].lineno - 1
    out = _text(stub_lines, _start(stub), head_end)
    stub_body = stub.body[1:] if doc_end else stub.body
    pre = [s for s in stub_body if not _is_stub_raise(s)]
    ref_body = ref.body[1:] if _docstring_end(ref) else ref.body
    if not ref_body:
        ref_body = ref.body
    matched = 0
    for stmt in pre:
        if matched < len(ref_body) and ast.dump(stmt) == ast.dump(ref_body[matched]):
            matched += 1
        else:
            matched = 0
            break
    if matched == len(pre) and pre and matched < len(ref_body):
        out += _text(stub_lines, pre[0].lineno, pre[-1].end_lineno)
        rest = ref_body[matched:]
    else:
        rest = ref_body
    indent = " " * rest[0].col_offset
    out.append(f"{indent}### BEGIN SOLUTION")
    out += _text(ref_lines, rest[0].lineno, ref.end_lineno)
    out.append(f"{indent}### END SOLUTION")
    return out


def _signature_only(ref_lines, ref) -> list[str]:
    """A reference member the stub lacks: its signature and docstring visible, its body the solution."""
    doc_end = _docstring_end(ref)
    head_end = doc_end if doc_end else ref.body[0].lineno - 1
    rest = ref.body[1:] if doc_end and len(ref.body) > 1 else ref.body
    indent = " " * rest[0].col_offset
    return [*_text(ref_lines, _start(ref), head_end), f"{indent}### BEGIN SOLUTION",
            *_text(ref_lines, rest[0].lineno, ref.end_lineno), f"{indent}### END SOLUTION"]


def _class(stub_lines, stub, ref_lines, ref, is_solution) -> list[str]:
    doc_end = _docstring_end(stub)
    members = stub.body[1:] if doc_end else stub.body
    out = _text(stub_lines, _start(stub), doc_end if doc_end else members[0].lineno - 1)
    ref_methods = {n.name: n for n in ref.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen = set()
    for node in members:
        out.append("")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ref_methods \
                and is_solution(f"{stub.name}.{node.name}"):
            seen.add(node.name)
            out += _function(stub_lines, node, ref_lines, ref_methods[node.name])
        else:
            seen.add(getattr(node, "name", None))
            out += _text(stub_lines, _start(node), node.end_lineno)
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


def _file_cells(file: str, selected: set[str], course) -> tuple[list, list[str]]:
    """Cells writing one contract file; also the ids of the solution cells."""
    module = file.removesuffix(".py")
    stub_src = (ROOT / "exercises" / file).read_text()
    ref_src = (ROOT / "solutions" / file).read_text()
    stub_tree, ref_tree = ast.parse(stub_src), ast.parse(ref_src)
    stub_lines, ref_lines = _lines(stub_src), _lines(ref_src)
    target = f"{SUB}/{file}"
    doc = ast.get_docstring(stub_tree) or ""
    cells = [_md(f"## `{file}`\n\n```text\n{doc}\n```" if doc else f"## `{file}`")]
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    body = stub_tree.body
    first_def = next((i for i, n in enumerate(body) if isinstance(n, defs)), len(body))
    header_nodes = [n for n in body[:first_def] if not (n is body[0] and doc)]
    header = _text(stub_lines, _start(header_nodes[0]), header_nodes[-1].end_lineno) if header_nodes else []
    stub_imports = {ast.dump(n) for n in header_nodes if isinstance(n, (ast.Import, ast.ImportFrom))}
    for node in ref_tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) not in stub_imports:
            header += _text(ref_lines, node.lineno, node.end_lineno)
    cells.append(_code_cell(f"%%writefile {target}\n" + "\n".join(header) + "\n",
                            _meta(f"{module}_header", locked=True)))
    ref_defs = {n.name: n for n in ref_tree.body if isinstance(n, defs)}
    solution_ids = []
    done = set()

    def is_solution(name: str) -> bool:
        return bool(_owners(module, name) & selected)

    def component_note(name: str) -> str:
        owners = [c for c in course.components if c.id in _owners(module, name)]
        parts = [f"**{c.title}** (`{c.id}`, {c.points:g} points)" for c in owners]
        hints = [f"*Hint ({c.id}):* {c.hint_ladder[0]}" for c in owners if c.id in selected and c.hint_ladder]
        return "\n\n".join([f"### `{name}`: " + ", ".join(parts), *hints])

    for node in body[first_def:]:
        if not isinstance(node, defs):
            cells.append(_code_cell(f"%%writefile -a {target}\n\n" + "\n".join(
                _text(stub_lines, _start(node), node.end_lineno)) + "\n", _meta(f"{module}_{node.lineno}", locked=True)))
            continue
        ref = ref_defs.get(node.name)
        done.add(node.name)
        members = [node.name] + [f"{node.name}.{m.name}" for m in getattr(node, "body", [])
                                 if isinstance(node, ast.ClassDef) and isinstance(m, ast.FunctionDef)]
        solution = ref is not None and any(is_solution(m) for m in members)
        if isinstance(node, ast.ClassDef) and ref is not None and solution:
            code = _class(stub_lines, node, ref_lines, ref, is_solution)
        elif solution:
            code = _function(stub_lines, node, ref_lines, ref)
        else:
            code = _text(stub_lines, _start(node), node.end_lineno)
        cell_id = f"{module}_{node.name}"
        cells.append(_md(component_note(node.name)))
        source = f"%%writefile -a {target}\n\n\n" + "\n".join(code) + "\n"
        cells.append(_code_cell(source, _meta(cell_id, solution=True) if solution else _meta(cell_id, locked=True)))
        if solution:
            solution_ids.append(cell_id)
    for name, node in ref_defs.items():  # reference helpers the stub lacks
        if name not in done and not name.startswith("__"):
            cell_id = f"{module}_{name}"
            code = _signature_only(ref_lines, node) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                else ["### BEGIN SOLUTION", *_text(ref_lines, _start(node), node.end_lineno), "### END SOLUTION"]
            cells.append(_code_cell(f"%%writefile -a {target}\n\n\n" + "\n".join(code) + "\n",
                                    _meta(cell_id, solution=True)))
            solution_ids.append(cell_id)
    return cells, solution_ids


def _test_cell(component) -> str:
    call = f'grade_component("{component.id}"'
    if component.hidden:
        return (f"from grader.notebook import grade_component\n\n"
                f"score = {call}, hidden=False)\n"
                f"### BEGIN HIDDEN TESTS\n"
                f"score = {call}, show=False)  # with the hidden checks\n"
                f"### END HIDDEN TESTS\n"
                f"score\n")
    return f"from grader.notebook import grade_component\n\n{call})\n"


def build_notebook(assignment, root: Path = ROOT):
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
    intro = (f"# {assignment.title}\n\n"
             f"{(ROOT / 'exercises' / '__init__.py').read_text().split(chr(10) * 2, 1)[0].strip(chr(34))}\n\n"
             "Fill in every cell that says `# YOUR CODE HERE` (replace `raise NotImplementedError()` with your "
             "code, keeping the indentation). Each code cell appends your code to a file in `submission/`; "
             "run the notebook top to bottom (Restart & Run All) after any edit. The cells under *Check your work* "
             "grade each component; their value is the points earned.\n\n"
             "| component | points |\n|---|---|\n" + "\n".join(f"| {c.title} (`{c.id}`) | {c.points:g} |"
                                                             for c in components))
    cells = [_md(intro), _code_cell(SETUP.format(root=str(root), sub=SUB), _meta("setup", locked=True))]
    for file in files:
        file_cells, _ = _file_cells(file, selected, course)
        cells += file_cells
    for file in others:
        cells.append(_code_cell(f"%%writefile {SUB}/{file}\n# Not part of this assignment (do not edit): the exercise file.\n"
                                + (ROOT / "exercises" / file).read_text(),
                                _meta(f"{file.removesuffix('.py')}_given", locked=True)))
    cells.append(_md("## Check your work\n\nEach cell below grades one component with the course's checks "
                     "and shows the points earned (hidden checks count only when the course staff grade)."))
    for component in components:
        cells.append(_md(f"### {component.title} (`{component.id}`, {component.points:g} points)"))
        cells.append(_code_cell(_test_cell(component), _meta(f"test_{component.id}", grade=True, locked=True,
                                                            points=component.points)))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write_course(out: Path, root: Path = ROOT) -> list[Path]:
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(CONFIG.format(course=load_course().name))
    written = []
    for assignment in load_assignments():
        path = out / "source" / assignment.id / f"{assignment.id}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        nb = build_notebook(assignment, root)
        nbformat.validate(nb)
        nbformat.write(nb, path)
        written.append(path)
    return written


def _nbgrader(args: argparse.Namespace) -> int:
    try:
        import nbformat  # noqa: F401
    except ImportError:
        print("the nbgrader channel needs nbformat: pip install 'transformer-drills[nbgrader]'", flush=True)
        return 2
    for path in write_course(Path(args.dir), Path(args.root).resolve()):
        print(f"wrote {path}")
    print(f"wrote {Path(args.dir) / 'nbgrader_config.py'}; next: cd {args.dir} && nbgrader generate_assignment ID")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("nbgrader", help="write an nbgrader course (config and source notebooks)")
    parser.add_argument("dir", metavar="DIR")
    parser.add_argument("--root", default=str(ROOT),
                        help="where the notebooks find the grader (default: this checkout; env DRILLS_ROOT overrides)")
    parser.set_defaults(func=_nbgrader)
