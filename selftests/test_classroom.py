"""The GitHub Classroom workflow: valid YAML that installs CPU torch, runs the grader and reports points."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.classroom import runner_result

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"


def test_workflow_parses_and_calls_the_grader():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "push" in workflow[True]  # YAML reads the key `on` as True
    steps = workflow["jobs"]["autograding"]["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    uses = [step.get("uses", "") for step in steps]
    assert "download.pytorch.org/whl/cpu" in runs
    assert "python -m grader grade exercises --results results.json" in runs
    assert "python -m grader.classroom results.json" in runs
    assert any(u.startswith("actions/setup-python@") for u in uses)
    reporter = next(step for step in steps if step.get("uses", "").startswith("classroom-resources/autograding-grading-reporter@"))
    runner = reporter["with"]["runners"]
    assert f"{runner.upper()}_RESULTS" in reporter["env"]
    assert "steps.grader.outputs.result" in reporter["env"][f"{runner.upper()}_RESULTS"]


@pytest.mark.timeout(120)
def test_workflow_grading_commands_run_here(tmp_path):
    """The workflow's grade and report commands, on the untouched stubs."""
    results = tmp_path / "results.json"
    run = subprocess.run([sys.executable, "-m", "grader", "grade", "exercises", "--results", str(results)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    payload = subprocess.run([sys.executable, "-m", "grader.classroom", str(results)], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    result = json.loads(base64.b64decode(payload.stdout.strip()))
    assert result["max_score"] == pytest.approx(100) and result["status"] == "fail"
    assert sum(t["score"] for t in result["tests"]) == 0 and len(result["tests"]) == 9
    points = subprocess.run([sys.executable, "-m", "grader.classroom", str(results), "--points"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert points.stdout.strip() == "Points 0/100"


def test_partial_credit_is_summed_per_component():
    results = {"tests": [
        {"name": "masking: a", "score": 2.0, "max_score": 2.0, "status": "passed", "tags": ["masking"]},
        {"name": "masking: b", "score": 0.5, "max_score": 3.0, "status": "failed", "tags": ["masking"]},
        {"name": "scaling: c", "score": 8.0, "max_score": 8.0, "status": "passed", "tags": ["scaling"]},
    ]}
    result = runner_result(results)
    by_name = {t["name"]: t for t in result["tests"]}
    assert by_name["masking"]["score"] == 2.5 and by_name["masking"]["status"] == "fail"
    assert by_name["scaling"]["status"] == "pass" and result["max_score"] == 13
