"""`python -m grader release OUTDIR`: the bundle a class receives.

The bundle holds the pristine stubs (grader/pristine.py: as committed, whatever
this checkout's exercises/ holds now) in exercises/ and grader/stubs/, the
public checks (tests/ without hidden checks), the grader, course.yml (without
hidden checks), pyproject.toml, kit.py and a Makefile, a student README and the GitHub
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

from ...contract import COMPONENTS, MODULES, OWNERS
from ...course import Course, load_course
from ...errors import GraderError
from ...paths import CHECKS_DIR, COURSE_FILE, GRADER, LAUNCHER, PYPROJECT, ROOT, SOLUTIONS, STANDINS
from .generated import render
from ...i18n import _, course_text, language
from ...pristine import PristineStubsError, changed_exercises, pristine_stubs, translate_stubs, write_shipped_stubs

IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache")
README_TEMPLATES = {"en": "release_README.md", "zh": "release_README.zh.md"}  # the student README per language

def _contract_names() -> dict[str, tuple[str, str]]:
    """Identifier -> (module, qualname) of the contract names code can mention.

    A class is mentioned by its name (constructing it runs `__init__`, calling
    the module runs `forward`); other methods by their own name (`self.project_qkv`).
    """
    names: dict[str, tuple[str, str]] = {}
    for module, owners in OWNERS.items():
        for qualname in owners:
            cls, _dot, method = qualname.partition(".")
            names.setdefault(cls, (module, cls))
            if method and not method.startswith("__") and method != "forward":
                names[method] = (module, qualname)
    return names


def _referenced(module: str, qualname: str) -> set[tuple[str, str]]:
    """The contract names that the reference code of `qualname` calls, constructs or reads."""
    tree = ast.parse((SOLUTIONS / f"{module}.py").read_text())
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


def student_readme(course: Course, lang: str = "en") -> str:
    """The bundle's README.md in `lang`: the components, how the bundle grades, how to check and hand in."""
    rows = "\n".join(f"| `{c.id}` | {course_text(c.id, c.title, lang)} | `exercises/{c.file}` | {c.points:g} |"
                     for c in course.components)
    ids = [c.id for c in course.components]
    context_rows = "\n".join(
        f"| `{c}` | " + ", ".join(f"`{d}`" for d in ids if d in context_dependents(c)) + " |"
        for c in ids if context_dependents(c))
    return render(README_TEMPLATES[lang], name=course.name, total=f"{course.total_points:g}", rows=rows,
                  context_rows=context_rows)


# What of grader/sandbox/standins/ a release ships: the table and the tools, which hold no answer (without the
# pieces, every component is graded in context: see grader/sandbox/standins/__init__.py).
SHIPPED_STANDINS = ("__init__", "recording", "parameters")


def _stubs() -> dict[str, str]:
    """The bundle's exercises/: the pristine stubs (grader/pristine.py), never a learner's work here."""
    stubs = pristine_stubs()
    changed = changed_exercises(stubs=stubs)
    if changed:
        print(f"release: exercises/ has local changes ({', '.join(changed)}); the bundle leaves them out and "
              "ships the pristine stubs (as committed at git HEAD)", file=sys.stderr)
    return stubs


def build_release(out: Path, lang: str | None = None) -> Path:
    """Write the bundle into `out` (new or empty). Raises PristineStubsError where the stubs cannot be found.

    Its exercises/ are the stubs in `lang` (default: the language in use, grader/i18n.py); its pristine copy
    (grader/stubs/) stays in English, and a drill in the bundle translates it as its own `--lang` says.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} exists and is not empty")
    stubs = _stubs()
    lang = lang or language()
    out.mkdir(parents=True, exist_ok=True)
    hidden = load_course().hidden_checks
    (out / "exercises").mkdir()
    warn = lambda message: print(f"release: {message}", file=sys.stderr)  # noqa: E731
    for name, text in translate_stubs(stubs, lang, warn).items():
        (out / "exercises" / name).write_text(text, encoding="utf-8")
    shutil.copytree(GRADER, out / "grader", ignore=IGNORE)
    write_shipped_stubs(out, stubs)  # the pristine copy a drill in the release starts from
    for piece in (out / STANDINS.relative_to(ROOT)).glob("*.py"):  # stand-ins are answers: only the tools ship
        if piece.stem not in SHIPPED_STANDINS:
            piece.unlink()
    from ...show.data import STORED, save_expected

    save_expected(out / STORED.relative_to(ROOT))  # `show`'s expected panels, which the stand-ins drew here
    shutil.copytree(CHECKS_DIR, out / "tests", ignore=IGNORE)
    for path in (out / "tests").glob("test_*.py"):
        component = path.stem.removeprefix("test_")
        names = {check for comp, check in hidden if comp == component}
        path.write_text(strip_checks(path.read_text(), names))
    course_text = COURSE_FILE.read_text()
    (out / "course.yml").write_text(public_course(course_text, hidden))
    shutil.copy(PYPROJECT, out / "pyproject.toml")
    shutil.copy(LAUNCHER, out / LAUNCHER.name)  # the set-up and `check` on every platform, without make
    (out / "Makefile").write_text(render("release_Makefile"))
    (out / ".gitignore").write_text(render("release_gitignore"))
    (out / "README.md").write_text(student_readme(load_course(), lang), encoding="utf-8")
    workflow = ROOT / ".github" / "workflows" / "classroom.yml"
    if workflow.is_file():  # GitHub Classroom: the bundle is the template repository
        (out / ".github" / "workflows").mkdir(parents=True)
        (out / ".github" / "workflows" / "classroom.yml").write_text(classroom_workflow(workflow.read_text(), lang))
    return out


GRADING_STEP = "python -m grader classroom"  # the workflow's grading step (.github/workflows/classroom.yml)


def classroom_workflow(text: str, lang: str) -> str:
    """The Classroom workflow of a bundle: its grading step in the bundle's language, whatever the runner's
    locale."""
    if text.count(GRADING_STEP) != 1:
        raise GraderError(f"the Classroom workflow must run `{GRADING_STEP}` once")
    return text.replace(GRADING_STEP, f"python -m grader --lang {lang} classroom")


def _release(args: argparse.Namespace) -> int:
    try:
        out = build_release(Path(args.outdir))
    except (FileExistsError, PristineStubsError) as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 2
    print(_("student bundle written to {path}").format(path=out))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("release", help=_("write the student bundle (no solutions, no hidden checks)"))
    parser.add_argument("outdir", metavar="OUTDIR", help=_("an empty or new folder"))
    parser.set_defaults(func=_release)
