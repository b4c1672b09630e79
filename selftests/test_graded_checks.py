"""The graded checks tell right from wrong: reference passes, stubs fail, bugs are caught fairly."""
from __future__ import annotations

from collections import Counter

import pytest

from grader.contract import COMPONENTS
from grader.course import load_course
from selftests.bugs import all_bugs, alternative_names

BUGS = all_bugs()
pytestmark = pytest.mark.timeout(1800)


def failing(report: dict) -> dict[str, list[str]]:
    """component -> names of checks with at least one failing case."""
    return {
        c["id"]: [k["name"] for k in c["checks"] if k["status"] != "passed"]
        for c in report["components"]
        if any(k["status"] != "passed" for k in c["checks"])
    }


def test_every_check_passes_on_the_reference(graded):
    report = graded["solutions"]
    assert failing(report) == {}
    assert report["score"] == pytest.approx(load_course().total_points)
    assert [c["id"] for c in report["components"]] and set(c["id"] for c in report["components"]) == set(COMPONENTS)


def test_every_check_fails_on_the_untouched_stubs(graded):
    report = graded["exercises"]
    passing_cases = {
        f"{c['id']}:{k['name']}": k["cases_passed"] for c in report["components"] for k in c["checks"] if k["cases_passed"]
    }
    assert passing_cases == {}, "these checks pass on a stub, so they cannot fail"
    assert report["score"] == 0
    assert {c["status"] for c in report["components"]} == {"not started"}


def test_the_catalogue_has_four_bugs_per_component_and_three_alternatives():
    counts = Counter(bug.component for bug in BUGS)
    assert {c: counts[c] for c in COMPONENTS if counts[c] < 4} == {}
    assert len(alternative_names()) >= 3


@pytest.mark.parametrize("bug", BUGS, ids=[b.id for b in BUGS])
def test_bug_fails_its_own_component_only(graded, bug):
    failures = failing(graded[f"bug:{bug.id}"])
    assert bug.component in failures, f"no check of {bug.component} catches: {bug.description}"
    others = {c: names for c, names in failures.items() if c != bug.component}
    assert others == {}, f"a {bug.component} bug costs points elsewhere: {others}"


@pytest.mark.parametrize("name", alternative_names())
def test_correct_alternative_passes_everything(graded, name):
    report = graded[f"alternative:{name}"]
    assert failing(report) == {}
    assert report["score"] == pytest.approx(load_course().total_points)
