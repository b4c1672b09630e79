"""Feedback that teaches: failing checks name the known mistake that a submission made.

`tests/checklib/mistakes/` models common mistakes (a module per component); a failing comparison whose
output matches one names it by id (a check's `diagnosis` in the results), and its message says it in a line
`diagnosis: <sentence>`. The catalogue's bugs expect ids.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from selftests.bugs import ROOT, all_bugs, materialize

BUGS = all_bugs()


def diagnosed(report: dict, component: str) -> list[list[str]]:
    """The ids of the known mistakes that the failing checks of `component` name, a list per check that names
    any (more than one: the check cannot tell them apart)."""
    return [[item["id"] for item in check["diagnosis"]] for c in report["components"] if c["id"] == component
            for check in c["checks"] if check["status"] != "passed" and check["diagnosis"]]


def failing_messages(report: dict, component: str) -> list[str]:
    return [check["message"] for c in report["components"] if c["id"] == component
            for check in c["checks"] if check["status"] != "passed"]


def test_every_bug_says_how_it_must_be_named():
    unsaid = [bug.id for bug in BUGS if bool(bug.diagnosis) == bool(bug.named_by)]
    assert not unsaid, f"each bug gives either `diagnosis` phrases or a `named_by` phrase: {unsaid}"


@pytest.mark.timeout(1800)
@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_each_bug_gets_its_own_diagnosis_and_no_wrong_one(graded, bug):
    """Every diagnosis of the bug's failing checks names it (one of its mistakes' ids); a bug that no value
    shows (`named_by`) gets no diagnosis, and its check's own words name it."""
    lines = diagnosed(graded[f"bug:{bug.id}"], bug.component)
    if bug.named_by:
        assert lines == [], f"{bug.description}: no diagnosis can name this one, yet the checks say {lines}"
        messages = failing_messages(graded[f"bug:{bug.id}"], bug.component)
        assert any(bug.named_by in m for m in messages), \
            f"{bug.description}: no failing message says {bug.named_by!r}: {[m[:200] for m in messages]}"
        return
    assert lines, f"{bug.description}: no diagnosis (expected one of {list(bug.diagnosis)})"
    wrong = [line for line in lines if not any(known in line for known in bug.diagnosis)]
    assert not wrong, f"{bug.description}: a diagnosis that does not name it: {wrong} (its own: {list(bug.diagnosis)})"


@pytest.mark.timeout(1800)
def test_the_reference_gets_no_diagnosis(graded):
    for label in ("solutions", *(label for label in graded if label.startswith("alternative:"))):
        lines = [line for c in graded[label]["components"] for line in diagnosed(graded[label], c["id"])]
        assert lines == [], f"{label}: {lines}"


def grade_bug(bug_id: str, tmp_path: Path) -> dict:
    bug = next(b for b in BUGS if b.id == bug_id)
    folder = materialize(bug, tmp_path / "impl")
    results = tmp_path / "results.json"
    proc = subprocess.run([sys.executable, "-m", "grader", "grade", str(folder), "--results", str(results)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(results.read_text())


@pytest.mark.parametrize("bug_id, check, sentence", [
    ("scaling:no_scale", "test_attention_scores_values",
     "diagnosis: your scores equal q·kᵀ without the 1/√d factor (d = q.size(-1))"),
    ("multi_head_attention:missing_out_proj", "test_mha_matches_torch",
     "diagnosis: you returned the merged heads without applying out_proj"),
])
def test_a_known_mistake_is_named_in_the_results(tmp_path, bug_id, check, sentence):
    results = grade_bug(bug_id, tmp_path)
    outputs = [t["output"] for t in results["tests"] if check in t["name"] and t["status"] == "failed"]
    assert outputs, f"no failing {check} in {[t['name'] for t in results['tests']]}"
    assert any(sentence in output for output in outputs), outputs
    diagnosis_at = outputs[0].find("diagnosis:")
    hint_at = outputs[0].find("hint:")
    assert -1 < diagnosis_at < hint_at, f"the diagnosis comes before the hint:\n{outputs[0]}"


def test_a_held_out_set_is_graded_as_the_grader_grades(tmp_path, capsys):
    """`python -m selftests.bugs --held-out SET.json`: each bug's diagnosis, or its first failing line; the counts."""
    from selftests.bugs.heldout import held_out

    scores = "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"
    bugs = [{"id": "set:scaling:no_scale", "component": "scaling", "what": "forgets the scale", "file": "attention.py",
             "old": scores, "new": "return q @ k.transpose(-2, -1)"},
            {"id": "set:scaling:none", "component": "scaling", "what": "a comment only", "file": "attention.py",
             "edits": [{"file": "attention.py", "old": scores, "new": scores + "  # same"}]}]
    path = tmp_path / "set.json"
    path.write_text(json.dumps(bugs))
    assert held_out([str(path)]) == 0
    out = capsys.readouterr().out
    assert "diagnosis: your scores equal q·kᵀ without the 1/√d factor" in out
    assert "2 bugs: 1 caught, 1 with a diagnosis, 1 not caught, 0 unfair" in out
