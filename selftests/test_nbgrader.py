"""`python -m grader nbgrader DIR` end to end with the real nbgrader (the optional extra `nbgrader`).

Generate the course, release it (no solution in the released notebook, the
stubs' leading statements kept), submit a correct, a half-correct, a buggy
(one catalogue bug) and an untouched copy, autograde (without nbgrader's
checksum warning), and check that the gradebook's score of every component
equals `python -m grader grade` on the same code and the points each cell
prints; then generate feedback and check that it holds every failing check's
whole message and nothing of a hidden check's. No notebook cell names the
checkout: the notebooks find the grader through `DRILLS_GRADER`, which the
course's nbgrader_config.py sets.
"""
from __future__ import annotations

import ast
import contextlib
import copy
import html
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.channels.nbgrader import notebook
from grader.course import load_assignments, load_course
from grader.channels.nbgrader.course import _markdown

nbformat = pytest.importorskip("nbformat", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")
pytest.importorskip("nbgrader", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
BUG = "scaling:no_scale"
HALF = ("attention_split_heads", "attention_merge_heads", "attention_attention_scores", "attention_causal_mask",
        "attention_apply_mask", "positional_sinusoidal_positional_encoding")


def _env() -> dict:
    # the notebooks find the grader through the course's nbgrader_config.py alone
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DRILLS_GRADER", "DRILLS_HIDDEN_CHECKS", "DRILLS_ROOT")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # nbgrader shells out to alembic
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _report(folder: Path, out: Path) -> dict:
    _run([sys.executable, "-m", "grader", "grade", str(folder), "--results", str(out), "--format", "json"], ROOT)
    return json.loads(out.read_text())


def _grade(folder: Path, out: Path) -> dict[str, float]:
    return {c["id"]: c["score"] for c in _report(folder, out)["components"]}


def _stub_leading_statements() -> dict[tuple[str, str], list[str]]:
    """(class, method) -> the statements before `raise NotImplementedError` of each exercise method stub."""
    found = {}
    for path in sorted((ROOT / "exercises").glob("*.py")):
        for cls in ast.parse(path.read_text()).body:
            if isinstance(cls, ast.ClassDef):
                for method in cls.body:
                    if isinstance(method, ast.FunctionDef):
                        body = method.body[1:] if ast.get_docstring(method) is not None else method.body
                        lead = [ast.unparse(s) for s in body if not isinstance(s, ast.Raise)]
                        if lead:
                            found[(cls.name, method.name)] = lead
    return found


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    _run([sys.executable, "-m", "grader", "nbgrader", str(course)], ROOT)
    return course


def test_source_notebook_layout(course):
    assignment = load_assignments()[0]
    nb = nbformat.read(course / "source" / assignment.id / f"{assignment.id}.ipynb", as_version=4)
    nbformat.validate(nb)
    tests = {c.metadata.nbgrader["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")}
    points = {c.id: c.points for c in load_course().components if c.id in assignment.components}
    assert {gid.removeprefix("test_"): c.metadata.nbgrader["points"] for gid, c in tests.items()} == points
    assert all(c.metadata.nbgrader["locked"] and not c.metadata.nbgrader["solution"] for c in tests.values())
    # hidden checks count through the environment nbgrader_config.py sets, not HIDDEN TESTS (nbgrader issue 1961)
    assert all(c.source.rstrip().endswith(f'grade_component("{gid.removeprefix("test_")}")')
               for gid, c in tests.items())
    assert not any("HIDDEN TESTS" in c.source for c in nb.cells)
    solutions = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solutions and all("### BEGIN SOLUTION" in c.source for c in solutions)
    config = (course / "nbgrader_config.py").read_text()
    assert f'os.environ.setdefault("DRILLS_GRADER", {json.dumps(str(ROOT))})' in config
    assert 'os.environ["DRILLS_HIDDEN_CHECKS"] = "1"' in config
    # no cell names the checkout: the notebooks find the grader through DRILLS_GRADER or an installed package
    assert not [c.source for c in nb.cells if str(ROOT) in c.source or "/work/" in c.source]


@pytest.mark.parametrize("index", range(len(load_assignments())))
def test_docstrings_are_markdown(course, index):
    from grader.contract import FILES

    assignment = load_assignments()[index]
    nb = nbformat.read(course / "source" / assignment.id / f"{assignment.id}.ipynb", as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert not [src for src in code if '"""' in src or "'''" in src], "a code cell holds a docstring"
    prose = re.sub(r"```text\n.*?```", "", markdown, flags=re.S)
    assert "``" not in prose and not re.search(r"::$", prose, re.M), "raw reStructuredText in a markdown cell"
    files = {f for c in assignment.components for f in FILES[c]}
    for path in sorted(p for p in (ROOT / "exercises").glob("*.py") if p.name in files):
        for node in ast.walk(ast.parse(path.read_text())):
            doc = ast.get_docstring(node) if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Module)) else None
            if doc:
                first = doc.splitlines()[0].replace("``", "`")
                assert first.rstrip(":") in markdown, (path.name, first)
    assert _markdown("Split ``x``, shape ``(B,\n T)``::\n\n    a = b\n\nThen:\n  a. one\n") == \
        "Split `x`, shape `(B, T)`:\n\n```text\na = b\n```\n\nThen:\n  - a. one"


def test_grading_path_imports_no_notebook_library():
    code = "import sys, grader.cli, grader.channels.nbgrader.notebook; assert 'nbformat' not in sys.modules, 'nbformat imported'"
    _run([sys.executable, "-c", code], ROOT)


def _printed_points(cell) -> tuple[float, str]:
    """The points a graded cell printed on its first line, and all it printed."""
    text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
    match = re.match(r"(\w+): (-?[\d.]+) of ", text)
    assert match, f"no points line in {text[:300]!r}"
    return float(match.group(2)), text


@pytest.mark.timeout(600)
def test_release_autograde_feedback(course, tmp_path):
    from selftests.bugs import all_bugs

    assignment = load_assignments()[0].id
    _run(["nbgrader", "generate_assignment", assignment, "--force"], course)
    released_path = course / "release" / assignment / f"{assignment}.ipynb"
    released_text = released_path.read_text()
    assert "BEGIN SOLUTION" not in released_text and "HIDDEN TESTS" not in released_text
    for line in ("masked_fill(~mask", "rearrange(x, \\\"b t (h d)", "torch.cat([self"):
        assert line not in released_text
    assert "raise NotImplementedError()" in released_text
    assert str(ROOT) not in released_text

    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    reference = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    released = nbformat.read(released_path, as_version=4)

    # a stub's leading statements (super().__init__(), which its docstring says to keep) stay in the release
    leading = _stub_leading_statements()
    assert ("MultiHeadAttention", "__init__") in leading
    for (cls, method), statements in leading.items():
        cell = next(c.source for c in released.cells if f"class {cls}" in c.source)
        body = cell.split(f"def {method}(", 1)[1].split("# YOUR CODE HERE", 1)[0]
        assert all(statement in body for statement in statements), (cls, method, statements, body)

    def submission(fill, edit=lambda text: text) -> object:
        nb = copy.deepcopy(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution") and fill(gid):
                cell.source = edit("\n".join(l for l in reference[gid].splitlines() if l.strip() not in
                                             ("### BEGIN SOLUTION", "### END SOLUTION")) + "\n")
        return nb

    bug = next(b for b in all_bugs() if b.id == BUG)
    students = {"correct": submission(lambda gid: True), "half": submission(lambda gid: gid in HALF),
                "buggy": submission(lambda gid: True, lambda text: text.replace(bug.old, bug.new)),
                "untouched": submission(lambda gid: False)}
    assert nbformat.writes(students["buggy"]) != nbformat.writes(students["correct"]), "the bug's snippet is gone"
    for student, nb in students.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    autograde = _run(["nbgrader", "autograde", assignment, "--create", "--force"], course)
    # nbgrader issue 1961: a locked cell with hidden tests warns "Attribute 'checksum' ... has changed!"
    assert "has changed" not in autograde.stdout + autograde.stderr, autograde.stderr[-3000:]

    from nbgrader.api import Gradebook

    components = load_assignments()[0].components
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook_scores = {student: {c: gb.find_grade(f"test_{c}", assignment, assignment, student).score
                                     for c in components} for student in students}
    submitted = {student: course / "autograded" / student / assignment / "submission" for student in students}
    reports = {
        "correct": _report(ROOT / "solutions", tmp_path / "correct.json"),
        "untouched": _report(ROOT / "exercises", tmp_path / "untouched.json"),
        # the code the half-correct and buggy notebooks wrote, graded outside nbgrader
        "half": _report(submitted["half"], tmp_path / "half.json"),
        "buggy": _report(submitted["buggy"], tmp_path / "buggy.json"),
    }
    expected = {student: {c["id"]: c["score"] for c in r["components"]} for student, r in reports.items()}
    for student in students:
        for component in components:
            assert notebook_scores[student][component] == pytest.approx(expected[student][component], abs=1e-4), \
                (student, component, notebook_scores[student], expected[student])
    assert sum(notebook_scores["correct"].values()) == pytest.approx(sum(
        c.points for c in load_course().components if c.id in components))
    assert sum(notebook_scores["untouched"].values()) == 0
    half = notebook_scores["half"]
    assert half["scaling"] == pytest.approx(load_course().component("scaling").points)
    assert half["kv_cache"] == 0 and 0 < sum(half.values()) < sum(notebook_scores["correct"].values())
    buggy = notebook_scores["buggy"]
    assert buggy["scaling"] < load_course().component("scaling").points
    assert all(buggy[c] == pytest.approx(notebook_scores["correct"][c]) for c in components if c != "scaling")
    # the buggy notebook wrote super().__init__() once per class that calls it
    assert (submitted["buggy"] / "attention.py").read_text().count("super().__init__()") == 1

    # what each graded cell prints: the points it is worth in the gradebook (hidden checks included)
    hidden = {c.id for c in load_course().components if c.hidden and c.id in components}
    assert hidden
    for student in students:
        nb = nbformat.read(course / "autograded" / student / assignment / f"{assignment}.ipynb", as_version=4)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            if cell.metadata.get("nbgrader", {}).get("grade"):
                printed, text = _printed_points(cell)
                value = float(next(o for o in cell.outputs if o.output_type == "execute_result").data["text/plain"])
                component = gid.removeprefix("test_")
                assert printed == pytest.approx(value, abs=0.005), (student, gid, text)
                assert value == pytest.approx(notebook_scores[student][component], abs=1e-4), (student, gid)
                assert "hidden checks, worth" not in text  # autograde counts them
                report = next(c for c in reports[student]["components"] if c["id"] == component)
                for check in report["checks"]:  # a hidden check: whether it passed, nothing more
                    if check["hidden"]:
                        assert re.search(rf"^  {check['name']}: [\d.]+/[\d.]+ (passed|failed) \(hidden check\)$",
                                         text, re.M), (student, check["name"], text)

    # the student's own kernel (no DRILLS_HIDDEN_CHECKS): the public checks only, and the same points printed
    folder = submitted["half"]
    notebook._cache[(str(folder.resolve()), notebook._fingerprint(folder))] = reports["half"]
    for component in hidden:
        public = sum(c["score"] for c in next(r for r in reports["half"]["components"] if r["id"] == component)
                     ["checks"] if not c["hidden"])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert notebook.grade_component(component, folder=folder) == pytest.approx(public, abs=1e-6)
        assert out.getvalue().startswith(f"{component}: {public:.2f} of "), out.getvalue()
        assert "hidden checks, worth" in out.getvalue()

    _run(["nbgrader", "generate_feedback", assignment, "--force"], course)
    # the messages of the code the notebooks wrote (the untouched notebook's stubs raise a bare NotImplementedError)
    reports["untouched"] = _report(submitted["untouched"], tmp_path / "untouched-notebook.json")
    for student in students:
        page = html.unescape((course / "feedback" / student / assignment / f"{assignment}.html").read_text())
        graded_here = set(next(a for a in load_assignments() if a.id == assignment).components)
        checks = [check for c in reports[student]["components"] if c["id"] in graded_here for check in c["checks"]]
        failing = [check for check in checks if check["status"] != "passed"]
        public_lines = {l.strip() for c in checks if not c["hidden"] for l in c["message"].splitlines()}
        for check in failing:
            lines = [l.strip() for l in check["message"].splitlines() if l.strip()]
            if check["hidden"]:  # nothing of a hidden check's message reaches a student
                assert not [l for l in lines if l not in public_lines and l in page], check["name"]
            else:  # the whole message: what was expected, what came back, the diagnosis, the hint
                assert lines and all(l in page for l in lines), (student, check["name"], lines)
    buggy_page = html.unescape((course / "feedback" / "buggy" / assignment / f"{assignment}.html").read_text())
    assert re.search(r"^\s+diagnosis: your scores equal q·kᵀ without the 1/√d factor", buggy_page, re.M)


@pytest.mark.timeout(600)
def test_llm_assignment_autogrades_as_the_grader_grades(course, tmp_path):
    """The LLM track's notebook: released, filled in (all of it, or every cell but one file's), autograded;
    each graded cell holds the points `python -m grader grade` gives the code the notebook wrote."""
    from nbgrader.api import Gradebook

    llm = next(a for a in load_assignments() if a.id == "llm")
    _run(["nbgrader", "generate_assignment", llm.id, "--force"], course)
    source = nbformat.read(course / "source" / llm.id / f"{llm.id}.ipynb", as_version=4)
    reference = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    released = nbformat.read(course / "release" / llm.id / f"{llm.id}.ipynb", as_version=4)
    skipped = "rope_"  # the cells of rope.py: rope earns nothing, and nothing else may lose for it

    def submission(fill) -> object:
        nb = copy.deepcopy(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution") and fill(gid):
                cell.source = "\n".join(l for l in reference[gid].splitlines() if l.strip() not in
                                        ("### BEGIN SOLUTION", "### END SOLUTION")) + "\n"
        return nb

    students = {"llm_correct": submission(lambda gid: True),
                "llm_no_rope": submission(lambda gid: not gid.startswith(skipped))}
    for student, nb in students.items():
        folder = course / "submitted" / student / llm.id
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{llm.id}.ipynb")
    _run(["nbgrader", "autograde", llm.id, "--create", "--force"], course)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        scores = {s: {c: gb.find_grade(f"test_{c}", llm.id, llm.id, s).score for c in llm.components}
                  for s in students}
    points = {c.id: c.points for c in load_course().components}
    assert scores["llm_correct"] == pytest.approx({c: points[c] for c in llm.components})
    written = course / "autograded" / "llm_no_rope" / llm.id / "submission"
    outside = {c["id"]: c["score"] for c in _report(written, tmp_path / "no_rope.json")["components"]}
    assert scores["llm_no_rope"] == pytest.approx({c: outside[c] for c in llm.components}, abs=1e-4)
    assert scores["llm_no_rope"]["rope"] == 0
    assert all(scores["llm_no_rope"][c] == pytest.approx(points[c]) for c in llm.components if c != "rope")
