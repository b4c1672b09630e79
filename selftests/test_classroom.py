"""The GitHub Classroom workflow: valid YAML that installs CPU torch, runs the grader and reports points."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grader.channels.classroom import runner_result
from grader.contract import COMPONENTS
from grader.course import load_course

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"


def grading_step(workflow_file: Path = WORKFLOW) -> dict:
    """The workflow's grading step (id `grader`), whose output the reporter reads."""
    steps = yaml.safe_load(workflow_file.read_text())["jobs"]["autograding"]["steps"]
    return next(step for step in steps if step.get("id") == "grader")


def run_grading_step(repo: Path, work: Path) -> tuple[dict, str, str]:
    """Run the grading step's `run:` text in `repo` as GitHub Actions does (bash -e, `python` on PATH).

    Returns the reporter's decoded input (the step output `result`), the step
    summary and the step's stdout.
    """
    work.mkdir(parents=True, exist_ok=True)
    output, summary = work / "github_output", work / "step_summary"
    output.write_text("")
    summary.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DRILLS_TARGET")}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", PYTHONDONTWRITEBYTECODE="1",
               GITHUB_ACTIONS="true", GITHUB_OUTPUT=str(output), GITHUB_STEP_SUMMARY=str(summary))
    step = grading_step(repo / ".github" / "workflows" / "classroom.yml")
    run = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, f"{step['run']}: exit {run.returncode}\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
    results = [line.split("=", 1)[1] for line in output.read_text().splitlines() if line.startswith("result=")]
    assert len(results) == 1, output.read_text()
    return json.loads(base64.b64decode(results[0])), summary.read_text(), run.stdout


def test_workflow_parses_and_calls_the_grader():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "push" in workflow[True]  # YAML reads the key `on` as True
    steps = workflow["jobs"]["autograding"]["steps"]
    runs = "\n".join(step.get("run", "") for step in steps)
    uses = [step.get("uses", "") for step in steps]
    assert "download.pytorch.org/whl/cpu" in runs
    assert grading_step()["run"].strip() == "python -m grader classroom exercises --results results.json"
    assert any(u.startswith("actions/setup-python@") for u in uses)
    reporter = next(step for step in steps if step.get("uses", "").startswith("classroom-resources/autograding-grading-reporter@"))
    runner = reporter["with"]["runners"]
    assert f"{runner.upper()}_RESULTS" in reporter["env"]
    assert "steps.grader.outputs.result" in reporter["env"][f"{runner.upper()}_RESULTS"]


@pytest.mark.timeout(120)
def test_workflow_grading_step_runs_here(tmp_path):
    """The workflow's grading step, on the untouched stubs: grades once and writes every output."""
    repo = tmp_path / "repo"  # a copy of what the step reads; it writes results.json there, as on a runner
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("grader", "tests", "exercises", ".github"):
        shutil.copytree(ROOT / name, repo / name, ignore=ignore)
    for name in ("course.yml", "pyproject.toml"):
        shutil.copy(ROOT / name, repo / name)
    result, summary, stdout = run_grading_step(repo, tmp_path / "github")
    total = load_course().total_points
    assert result["max_score"] == pytest.approx(total) and result["status"] == "fail"
    assert sum(t["score"] for t in result["tests"]) == 0 and len(result["tests"]) == len(COMPONENTS)
    assert stdout.strip() == f"Points 0/{total:g}"
    assert summary.startswith(f"## transformer-drills: 0/{total:g}")
    assert json.loads((repo / "results.json").read_text())["score"] == 0  # the same run wrote results.json


def test_partial_credit_is_summed_per_component():
    from grader.results import CheckResult, ComponentResult, Report

    masking = ComponentResult("masking", "Masking", "failed", 2.5, 5.0, [
        CheckResult("a", "masking", "passed", 2.0, 2.0, 1, 1), CheckResult("b", "masking", "failed", 0.5, 3.0, 1, 6)],
        "b: wrong")
    scaling = ComponentResult("scaling", "Scaling", "passed", 8.0, 8.0, [CheckResult("c", "scaling", "passed", 8.0, 8.0, 1, 1)])
    result = runner_result(Report("x", [masking, scaling], 0.0))
    by_name = {t["name"]: t for t in result["tests"]}
    assert by_name["masking"]["score"] == 2.5 and by_name["masking"]["status"] == "fail"
    assert by_name["scaling"]["status"] == "pass" and result["max_score"] == 13
