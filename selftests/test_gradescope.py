"""`python -m grader gradescope OUT.zip`: run its run_autograder against a simulated /autograder tree."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader.course import load_course

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("gradescope") / "autograder.zip"
    result = subprocess.run([sys.executable, "-m", "grader", "gradescope", str(out)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return out


def simulate(zip_path: Path, root: Path, files: dict[str, Path]) -> dict:
    """Unpack as Gradescope does, place the submission, run run_autograder; returns results.json."""
    with zipfile.ZipFile(zip_path) as zf:
        zf.extractall(root / "source")
    for path in (root / "source").rglob("*"):  # zipfile drops the modes; Gradescope keeps them
        if path.name in ("run_autograder", "setup.sh"):
            path.chmod(0o755)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir(parents=True)
    for name, source in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / "submission" / name)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
           "AUTOGRADER_ROOT": str(root), "DRILLS_PYTHON": sys.executable, "PYTHONDONTWRITEBYTECODE": "1"}
    result = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stderr
    return json.loads((root / "results" / "results.json").read_text())


def test_zip_layout(autograder_zip):
    with zipfile.ZipFile(autograder_zip) as zf:
        names = set(zf.namelist())
        modes = {i.filename: (i.external_attr >> 16) & 0o777 for i in zf.infolist()}
        setup = zf.read("setup.sh").decode()
    assert {"setup.sh", "run_autograder", "requirements.txt", "course.yml", "grader/cli.py", "grader/engine/runner.py"} <= names
    assert {f"tests/test_{c.id}.py" for c in load_course().components} <= names
    assert not [n for n in names if n.startswith(("solutions/", "selftests/", "exercises/")) or "__pycache__" in n]
    assert modes["run_autograder"] & 0o111 and modes["setup.sh"] & 0o111
    assert "download.pytorch.org/whl/cpu" in setup


@pytest.mark.timeout(240)
def test_run_autograder_grades_a_nested_submission_with_hidden_checks_after_published(autograder_zip, tmp_path):
    files = {f"my_work/{p.name}": p for p in (ROOT / "solutions").glob("*.py") if p.name != "__init__.py"}
    results = simulate(autograder_zip, tmp_path / "autograder", files)
    assert results["score"] == pytest.approx(load_course().total_points)
    course = load_course()
    hidden = {(c.id, h) for c in course.components for h in c.hidden}
    assert len(results["tests"]) == sum(len(c.checks) for c in course.components)  # hidden checks graded too
    for test in results["tests"]:
        component, check = test["name"].split(": ", 1)
        assert test["tags"][0] == component
        expected = "after_published" if (component, check) in hidden else "visible"
        assert test.get("visibility") == expected, test["name"]


@pytest.mark.timeout(240)
def test_run_autograder_with_stubs_and_a_broken_file_still_writes_results(autograder_zip, tmp_path):
    broken = tmp_path / "vit.py"
    broken.write_text("def patchify(:\n")
    files = {p.name: p for p in (ROOT / "exercises").glob("*.py") if p.name not in ("__init__.py", "vit.py")}
    results = simulate(autograder_zip, tmp_path / "autograder", {**files, "vit.py": broken})
    assert results["score"] == 0
    vit = [t for t in results["tests"] if t["tags"][0] in ("patch_embedding", "vit_classifier")]
    assert vit and all(t["status"] == "failed" for t in vit)
    # the broken file is named once, at the top; its tests point there, the others say not started
    assert results["output"].count("vit.py failed to import: SyntaxError") == 1, results["output"]
    assert all(t["output"].startswith("not graded: vit.py failed to import") and t["output"].endswith("(see the top)")
               for t in vit), vit[0]["output"]
    assert all("not started" in t["output"] or t["visibility"] == "after_published"
               for t in results["tests"] if t["tags"][0] not in ("patch_embedding", "vit_classifier")), results["tests"]
