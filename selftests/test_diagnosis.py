"""Feedback that teaches: failing checks name the known mistake that a submission made.

`tests/checklib/mistakes.py` models common mistakes; a failing comparison whose
output matches one adds a line `diagnosis: <sentence>` to its message.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from selftests.bugs import ROOT, all_bugs, materialize

BUGS = all_bugs()
# Bugs that no value comparison can name: a missing ValueError, an error raised by student code,
# a device, dropout randomness. Everything else in the catalogue is expected to be diagnosed.
FLOOR = 0.6


def diagnosed(report: dict, component: str) -> list[str]:
    """The diagnosis lines in the messages of the failing checks of `component`."""
    lines = []
    for c in report["components"]:
        if c["id"] != component:
            continue
        for check in c["checks"]:
            if check["status"] != "passed":
                lines += [line.strip() for line in check["message"].splitlines() if line.strip().startswith("diagnosis:")]
    return lines


@pytest.mark.timeout(1800)
def test_most_catalogue_bugs_get_a_named_diagnosis(graded):
    named = {bug.id: diagnosed(graded[f"bug:{bug.id}"], bug.component) for bug in BUGS}
    missing = sorted(bug_id for bug_id, lines in named.items() if not lines)
    count = len(BUGS) - len(missing)
    assert count >= FLOOR * len(BUGS), (
        f"{count} of {len(BUGS)} catalogue bugs get a named diagnosis (floor {FLOOR:.0%}); "
        f"undiagnosed: {missing}"
    )


# Components whose every catalogued bug is a wrong value that a diagnosis names (none is only a missing
# ValueError or a forbidden library call, which their own checks name).
ALL_DIAGNOSED = ("swiglu", "rope", "grouped_query_attention", "sampling", "tiny_lm", "vit_classifier", "swin_windows",
                 "window_attention")


@pytest.mark.timeout(1800)
def test_every_bug_of_the_newer_components_gets_a_named_diagnosis(graded):
    missing = sorted(bug.id for bug in BUGS
                     if bug.component in ALL_DIAGNOSED and not diagnosed(graded[f"bug:{bug.id}"], bug.component))
    assert not missing, f"catalogued bugs without a diagnosis: {missing}"


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
