"""`python -m grader nbgrader DIR` end to end with the real nbgrader (the optional extra `nbgrader`).

Generate the course, release it (no solution in the released notebook), submit
a correct, a half-correct and an untouched copy, autograde, and check that the
gradebook's score of every component equals `python -m grader grade` on the
same code; then generate feedback.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import load_assignments, load_course

nbformat = pytest.importorskip("nbformat", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")
pytest.importorskip("nbgrader", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
HALF = ("attention_split_heads", "attention_merge_heads", "attention_attention_scores", "attention_causal_mask",
        "attention_apply_mask", "positional_sinusoidal_positional_encoding")


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # nbgrader shells out to alembic
    env["DRILLS_ROOT"] = str(ROOT)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    result = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{args} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _grade(folder: Path, out: Path) -> dict[str, float]:
    _run([sys.executable, "-m", "grader", "grade", str(folder), "--results", str(out), "--format", "json"], ROOT)
    return {c["id"]: c["score"] for c in json.loads(out.read_text())["components"]}


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
    hidden = {c.id for c in load_course().components if c.hidden and c.id in assignment.components}
    assert {gid.removeprefix("test_") for gid, c in tests.items() if "### BEGIN HIDDEN TESTS" in c.source} == hidden
    solutions = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert solutions and all("### BEGIN SOLUTION" in c.source for c in solutions)
    assert (course / "nbgrader_config.py").exists()


@pytest.mark.timeout(600)
def test_release_autograde_feedback(course, tmp_path):
    assignment = load_assignments()[0].id
    _run(["nbgrader", "generate_assignment", assignment, "--force"], course)
    released_path = course / "release" / assignment / f"{assignment}.ipynb"
    released_text = released_path.read_text()
    assert "BEGIN SOLUTION" not in released_text and "HIDDEN TESTS" not in released_text
    for line in ("masked_fill(~mask", "rearrange(x, \\\"b t (h d)", "torch.cat([self"):
        assert line not in released_text
    assert "raise NotImplementedError()" in released_text

    source = nbformat.read(course / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    reference = {c.metadata["nbgrader"]["grade_id"]: c.source for c in source.cells
                 if c.metadata.get("nbgrader", {}).get("solution")}
    released = nbformat.read(released_path, as_version=4)

    def submission(fill) -> object:
        nb = copy.deepcopy(released)
        for cell in nb.cells:
            gid = cell.metadata.get("nbgrader", {}).get("grade_id")
            if cell.metadata.get("nbgrader", {}).get("solution") and fill(gid):
                cell.source = "\n".join(l for l in reference[gid].splitlines() if l.strip() not in
                                        ("### BEGIN SOLUTION", "### END SOLUTION")) + "\n"
        return nb

    students = {"correct": submission(lambda gid: True), "half": submission(lambda gid: gid in HALF),
                "untouched": submission(lambda gid: False)}
    for student, nb in students.items():
        folder = course / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    _run(["nbgrader", "autograde", assignment, "--create", "--force"], course)

    from nbgrader.api import Gradebook

    components = load_assignments()[0].components
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        notebook_scores = {student: {c: gb.find_grade(f"test_{c}", assignment, assignment, student).score
                                     for c in components} for student in students}
    expected = {
        "correct": _grade(ROOT / "solutions", tmp_path / "correct.json"),
        "untouched": _grade(ROOT / "exercises", tmp_path / "untouched.json"),
        # the code the half-correct notebook wrote, graded outside nbgrader
        "half": _grade(course / "autograded" / "half" / assignment / "submission", tmp_path / "half.json"),
    }
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

    _run(["nbgrader", "generate_feedback", assignment, "--force"], course)
    for student in students:
        assert (course / "feedback" / student / assignment / f"{assignment}.html").exists()
