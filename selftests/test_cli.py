"""The grader's command line, as the contract states it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from grader.course import load_course

ROOT = Path(__file__).resolve().parent.parent


def grader(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_check_on_untouched_stubs_reports_zero_and_not_started():
    result = grader("check")
    assert result.returncode == 0, result.stderr
    assert f"0/{load_course().total_points:g}" in result.stdout
    for component in COMPONENTS:
        line = next(l for l in result.stdout.splitlines() if l.split() and l.split()[0] == component)
        assert "not started" in line
    assert "hint:" not in result.stdout  # hints only when asked for


def test_hints_are_given_for_a_component_not_started():
    from grader.course import load_course

    result = grader("check", "masking", "--hints")
    assert result.returncode == 0, result.stderr
    assert "masking: not started" in result.stdout
    assert f"hint: {load_course(ROOT / 'course.yml').component('masking').hint}" in result.stdout


def test_check_one_component_as_json():
    result = grader("check", "masking", "--json")
    report = json.loads(result.stdout)
    assert [c["id"] for c in report["components"]] == ["masking"]
    assert report["components"][0]["status"] == "not started"


def test_check_rejects_unknown_component():
    result = grader("check", "xyzzy")
    assert result.returncode == 2
    assert "unknown component(s): xyzzy;" in result.stderr and "did you mean" not in result.stderr


def test_check_suggests_the_component_meant():
    result = grader("check", "masks", "scaling", "kv_cach")
    assert result.returncode == 2
    assert "masks (did you mean masking?)" in result.stderr and "kv_cach (did you mean kv_cache?)" in result.stderr
    assert "scaling (" not in result.stderr  # a known name is not reported


def test_grade_reference_writes_full_gradescope_results(tmp_path):
    results, full = tmp_path / "r.json", tmp_path / "report.json"
    result = grader("grade", "solutions", "--results", str(results), "--also", f"json={full}",
                    "--also", f"markdown={tmp_path / 'summary.md'}")
    assert result.returncode == 0, result.stderr
    data = json.loads(results.read_text())
    assert data["score"] == pytest.approx(load_course().total_points)
    # one grading, several formats: the same score in each
    assert json.loads(full.read_text())["score"] == data["score"]
    assert f"{load_course().total_points:g}/{load_course().total_points:g}" in (tmp_path / "summary.md").read_text()
    assert {t["tags"][0] for t in data["tests"]} == set(COMPONENTS)
    for test in data["tests"]:
        assert set(test) >= {"name", "score", "max_score", "status", "output", "tags"}
        assert test["status"] == "passed"


def test_missing_and_broken_files_cost_only_their_components(tmp_path):
    submission = tmp_path / "submission"
    shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
    (submission / "vit.py").unlink()
    (submission / "positional.py").write_text("def broken(:\n")
    results = tmp_path / "r.json"
    result = grader("grade", str(submission), "--results", str(results))
    assert result.returncode == 0, result.stderr
    tests = json.loads(results.read_text())["tests"]
    by_component: dict[str, list[dict]] = {}
    for test in tests:
        by_component.setdefault(test["tags"][0], []).append(test)
    for component in ("patch_embedding", "vit_classifier"):
        assert all(t["score"] == 0 and "vit.py is missing" in t["output"] for t in by_component[component])
    assert all(t["score"] == 0 and "SyntaxError" in t["output"] for t in by_component["sinusoidal_encoding"])
    for component in set(COMPONENTS) - {"patch_embedding", "vit_classifier", "sinusoidal_encoding"}:
        assert all(t["status"] == "passed" for t in by_component[component]), component

