"""Grading inside a notebook (the nbgrader channel): a test cell's score for one component.

A notebook made by `python -m grader nbgrader` writes the student's code into a
package folder (`submission/` next to the notebook) and ends each graded test
cell with `grade_component(ID)`: the points earned, in course.yml points, which
nbgrader reads as partial credit. The first call grades the whole folder once,
in a subprocess running `python -m grader grade` (student code never runs in
the kernel); later calls reuse the result while the folder's files are
unchanged. Nothing is printed, least of all to stderr (stderr zeroes a cell).
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUBMISSION = "submission"

_cache: dict[tuple[str, str], dict] = {}


class NotebookGradingError(RuntimeError):
    """The grader could not grade the notebook's code (not the student's fault)."""


def _fingerprint(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def grade_folder(folder: str | Path = SUBMISSION) -> dict:
    """The JSON report (`python -m grader grade --format json`) of `folder`, cached by its contents."""
    folder = Path(folder).resolve()
    key = (str(folder), _fingerprint(folder))
    if key not in _cache:
        with tempfile.TemporaryDirectory(prefix="drills-notebook-") as tmp:
            results = Path(tmp) / "results.json"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]), "PYTHONDONTWRITEBYTECODE": "1"}
            proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--results", str(results),
                                   "--format", "json"], cwd=ROOT, env=env, capture_output=True, text=True)
            if proc.returncode != 0 or not results.exists():
                raise NotebookGradingError(f"the grader failed (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
                                           f"{proc.stdout[-2000:]}")
            _cache[key] = json.loads(results.read_text())
    return _cache[key]


def grade_component(component_id: str, *, hidden: bool = True, folder: str | Path = SUBMISSION,
                    show: bool = True) -> float:
    """Points earned by `component_id` (course.yml points); `hidden=False` leaves the hidden checks out.

    With `show`, prints one line per check (stdout only), a hidden check's
    outcome without its message.
    """
    report = grade_folder(folder)
    component = next((c for c in report["components"] if c["id"] == component_id), None)
    if component is None:
        raise NotebookGradingError(f"unknown component {component_id!r}")
    checks = [c for c in component["checks"] if hidden or not c.get("hidden")]
    score = sum(c["score"] for c in checks)
    if show:
        print(f"{component_id}: {score:.2f} points ({component['status']})")
        for check in checks:
            if check.get("hidden"):
                line = "hidden check: " + ("passed" if check["status"] == "passed" else "failed")
            else:
                line = check["status"] if check["status"] == "passed" else (check["message"] or check["status"])
            first = (line.strip().splitlines() or [""])[0][:300]
            print(f"  {check['name']}: {check['score']:.2f}/{check['max_score']:.2f}  {first}")
    return round(score, 6)
