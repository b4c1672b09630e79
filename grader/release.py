"""`python -m grader release OUTDIR`: the bundle a class receives.

The bundle holds the pristine stubs (grader/pristine.py: as committed, whatever
this checkout's exercises/ holds now) in exercises/ and grader/stubs/, the
public checks (tests/ without hidden checks), the grader, course.yml (without
hidden checks), pyproject.toml, a Makefile, a student README and the GitHub
Classroom workflow (.github/workflows/classroom.yml). It never holds solutions/
or the hidden checks.
"""
from __future__ import annotations

import argparse
import ast
import functools
import shutil
import sys
from pathlib import Path

import yaml

from .contract import COMPONENTS, MODULES, OWNERS
from .pristine import PristineStubsError, changed_exercises, pristine_stubs, write_shipped_stubs

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")

STUDENT_MAKEFILE = """\
# make grade: set up .venv on first use, then grade your exercises/ component by component.
PYTHON ?= python3
VENV   ?= .venv
TORCH  ?= torch>=2.2
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: grade

$(STAMP): pyproject.toml
\t$(PYTHON) -m venv $(VENV)
\t$(BIN)/python -m pip install --quiet --upgrade pip
\t$(BIN)/python -m pip install --quiet "$(TORCH)"
\t$(BIN)/python -m pip install --quiet -e .
\ttouch $(STAMP)

grade: $(STAMP)
\t$(BIN)/python -m grader check $(COMPONENTS)
"""


def _contract_names() -> dict[str, tuple[str, str]]:
    """Identifier -> (module, qualname) of the contract names code can mention.

    A class is mentioned by its name (constructing it runs `__init__`, calling
    the module runs `forward`); other methods by their own name (`self.project_qkv`).
    """
    names: dict[str, tuple[str, str]] = {}
    for module, owners in OWNERS.items():
        for qualname in owners:
            cls, _, method = qualname.partition(".")
            names.setdefault(cls, (module, cls))
            if method and not method.startswith("__") and method != "forward":
                names[method] = (module, qualname)
    return names


def _referenced(module: str, qualname: str) -> set[tuple[str, str]]:
    """The contract names that the reference code of `qualname` calls, constructs or reads."""
    tree = ast.parse((ROOT / "solutions" / f"{module}.py").read_text())
    node: ast.AST = tree
    for part in qualname.split("."):
        node = next(n for n in ast.iter_child_nodes(node)
                    if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == part)
    known = _contract_names()
    found = set()
    for sub in ast.walk(node):
        ident = sub.id if isinstance(sub, ast.Name) else sub.attr if isinstance(sub, ast.Attribute) else None
        if ident in known and known[ident] != (module, qualname):
            found.add(known[ident])
    return found


def _expand(module: str, qualname: str) -> set[tuple[str, str]]:
    """A class stands for all its contract methods; a method needs its class's __init__."""
    cls = qualname.split(".")[0]
    members = {(module, q) for q in OWNERS[module] if q == qualname or q.startswith(cls + ".")}
    if "." in qualname:
        members = {(module, qualname)} | ({(module, f"{cls}.__init__")} & members)
    return members or {(module, qualname)}


@functools.cache
def _reaches(component: str) -> frozenset[tuple[str, str]]:
    """Every contract name the code of `component` runs when nothing is swapped (the reference's calls)."""
    todo = [n for m in MODULES for q, owners in OWNERS[m].items() if component in owners for n in _expand(m, q)]
    seen: set[tuple[str, str]] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += [n for ref in _referenced(*name) for n in _expand(*ref) if n not in seen]
    return frozenset(seen)


def context_dependents(component: str) -> frozenset[str]:
    """The components where, graded in context (a release), a bug in `component` can also cost points.

    Those whose code, as the reference writes it, runs code that `component`
    owns and they do not: the official grader swaps that code for a trusted
    stand-in, a release cannot (the stand-ins would be answers).
    """
    return frozenset(c for c in COMPONENTS if c != component and any(
        component in OWNERS[m][q] and c not in OWNERS[m][q] for m, q in _reaches(c)))


def strip_checks(source: str, names: set[str]) -> str:
    """`source` without the top-level test functions in `names` (decorators included)."""
    if not names:
        return source
    lines = source.splitlines(keepends=True)
    drop: list[tuple[int, int]] = []
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
            drop.append((start, node.end_lineno))
    for start, end in sorted(drop, reverse=True):
        del lines[start:end]
    return "".join(lines)


def public_course(text: str, hidden: frozenset[tuple[str, str]]) -> str:
    """course.yml for students: hidden checks removed (the text is kept as it is when nothing is hidden)."""
    data = yaml.safe_load(text)
    if not any(entry.get("hidden") for entry in data.get("components") or []) and not hidden:
        return text
    for entry in data.get("components") or []:
        entry.pop("hidden", None)
        entry["checks"] = {k: v for k, v in entry["checks"].items() if (entry["id"], k) not in hidden}
    header = "".join(l for l in text.splitlines(keepends=True)[:10] if l.startswith("#"))
    return header + yaml.safe_dump(data, sort_keys=False)


def student_readme(course_text: str) -> str:
    data = yaml.safe_load(course_text)
    name = data.get("name", "transformer-drills")
    rows = "\n".join(f"| `{c['id']}` | {c['title']} | `exercises/{c['file']}` | {c['points']:g} |"
                     for c in data["components"])
    total = sum(float(c["points"]) for c in data["components"])
    ids = [c["id"] for c in data["components"]]
    context_rows = "\n".join(
        f"| `{c}` | " + ", ".join(f"`{d}`" for d in ids if d in context_dependents(c)) + " |"
        for c in ids if context_dependents(c))
    return f"""# {name}

Build a Transformer by hand in PyTorch. You fill in the stubs in `exercises/`
(every function starts as `raise NotImplementedError(...)`), and the grader
tells you, component by component, what passes, what fails and why.

## Set up

Python 3.10+ and `make`:

```sh
make grade
```

creates `.venv` with everything it needs on first use and grades your
`exercises/`. Without `make`: `python -m venv .venv`, then
`.venv/bin/pip install torch -e .` (a CPU build of torch is enough).

## The components

In teaching order ({total:g} points in all):

| component | what it is | file | points |
|---|---|---|---|
{rows}

Each file's docstrings explain the shapes and the idea; `TODO` marks where your
code goes.

## How this bundle grades

Here each component is graded together with your own code for the components
it uses: multi-head attention runs your `attention_scores`, your masks, your
head splitting. So a mistake can also cost points in the components built on
the code it is in, until it is fixed:

| a mistake in | can also cost points here in |
|---|---|
{context_rows}

Where your course grades on Gradescope, in nbgrader or with the instructors'
`grade-all`, each component is graded on its own, with trusted implementations
of the others, so there a mistake costs points only in its own component; those
also run checks that are not in this bundle. A GitHub Classroom assignment made
from this bundle grades as this bundle does.

## Checking your work

```sh
python -m grader check
python -m grader check masking
python -m grader check masking -v --hints
python -m pytest tests/test_masking.py -q
```

The first grades every component; the others one component: a table, the first
failing check's message (`-v` lists every check, `--hints` adds a hint). A
failing check says what it expected and what came back.

## Handing in

```sh
python -m grader grade exercises --results results.json
```

writes your score on the public checks, graded as `check` grades them, into
`results.json` (the GitHub Classroom workflow of this bundle runs the same
grading on every push). Hand in the files
of `exercises/` as your course asks (a zip of the folder, a GitHub push, ...).
"""


# What of grader/standins/ a release ships: the table and the tools, which hold no answer (without the
# pieces, every component is graded in context: see grader/standins/__init__.py).
SHIPPED_STANDINS = ("__init__", "recording", "parameters")


def _stubs() -> dict[str, str]:
    """The bundle's exercises/: the pristine stubs (grader/pristine.py), never a learner's work here."""
    stubs = pristine_stubs()
    changed = changed_exercises(stubs=stubs)
    if changed:
        print(f"release: exercises/ has local changes ({', '.join(changed)}); the bundle leaves them out and "
              "ships the pristine stubs (as committed at git HEAD)", file=sys.stderr)
    return stubs


def build_release(out: Path) -> Path:
    """Write the bundle into `out` (new or empty). Raises PristineStubsError where the stubs cannot be found."""
    from .course import load_course

    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    stubs = _stubs()
    out.mkdir(parents=True, exist_ok=True)
    hidden = load_course().hidden_checks
    (out / "exercises").mkdir()
    for name, text in stubs.items():
        (out / "exercises" / name).write_text(text, encoding="utf-8")
    shutil.copytree(ROOT / "grader", out / "grader", ignore=IGNORE)
    write_shipped_stubs(out, stubs)  # the pristine copy a drill in the release starts from
    for piece in (out / "grader" / "standins").glob("*.py"):  # stand-ins are answers: only the tools ship
        if piece.stem not in SHIPPED_STANDINS:
            piece.unlink()
    shutil.copytree(ROOT / "tests", out / "tests", ignore=IGNORE)
    for path in (out / "tests").glob("test_*.py"):
        component = path.stem.removeprefix("test_")
        names = {check for comp, check in hidden if comp == component}
        path.write_text(strip_checks(path.read_text(), names))
    course_text = (ROOT / "course.yml").read_text()
    (out / "course.yml").write_text(public_course(course_text, hidden))
    shutil.copy(ROOT / "pyproject.toml", out / "pyproject.toml")
    (out / "Makefile").write_text(STUDENT_MAKEFILE)
    (out / ".gitignore").write_text(".venv/\n__pycache__/\n*.pyc\n*.egg-info/\nresults.json\n")
    (out / "README.md").write_text(student_readme(course_text))
    workflow = ROOT / ".github" / "workflows" / "classroom.yml"
    if workflow.is_file():  # GitHub Classroom: the bundle is the template repository
        (out / ".github" / "workflows").mkdir(parents=True)
        shutil.copy(workflow, out / ".github" / "workflows" / "classroom.yml")
    return out


def _release(args: argparse.Namespace) -> int:
    try:
        out = build_release(Path(args.outdir))
    except (FileExistsError, PristineStubsError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    print(f"student bundle written to {out}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("release", help="write the student bundle (no solutions, no hidden checks)")
    parser.add_argument("outdir", metavar="OUTDIR", help="an empty or new folder")
    parser.set_defaults(func=_release)
