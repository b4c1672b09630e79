"""course.yml agrees with the contract and with the check files."""
from __future__ import annotations

import ast
import json
from decimal import Decimal
from pathlib import Path

import pytest

from grader.contract import COMPONENTS, TRACKS
from grader.course import POINT_UNITS, CourseError, load_course
from grader.channels.render.formats import format_points, to_gradescope
from grader.results import FAILED, PASSED, CaseResult, Report
from grader.engine.scoring import score_component as _score_component

ROOT = Path(__file__).resolve().parent.parent


def check_names(component: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / f"test_{component}.py").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


# The core track is worth 100 points; the other tracks' points come on top.
CORE_TRACK = TRACKS["core"]


def test_course_lists_every_component_once_for_100_points():
    course = load_course()
    assert sorted(c.id for c in course.components) == sorted(COMPONENTS)
    assert sum(course.component(c).points for c in CORE_TRACK) == 100


@pytest.mark.parametrize("component", COMPONENTS)
def test_course_weights_exactly_the_checks_of_each_file(component):
    listed = set(load_course().component(component).checks)
    assert listed == check_names(component)


def test_a_broken_course_file_is_reported(tmp_path):
    bad = tmp_path / "course.yml"
    bad.write_text("components:\n  - id: attention\n    title: x\n    points: 5\n    checks: {t: 1}\n")
    with pytest.raises(CourseError, match="not a component"):
        load_course(bad)
    bad.write_text("components: [\n")
    with pytest.raises(CourseError, match="not valid YAML"):
        load_course(bad)


def test_gating_names_listed_checks_only(tmp_path):
    head = "components:\n  - id: scaling\n    title: x\n    points: 8\n"
    cases = {
        "core: [test_b]\n    checks: {test_a: 1}\n": "does not weight",
        "core: [test_a]\n    standalone: [test_a]\n    checks: {test_a: 1}\n": "both core and standalone",
        "standalone: [test_a]\n    checks: {test_a: 1}\n": "no core checks",
        "hidden: [test_a]\n    core: [test_a]\n    checks: {test_a: 1, test_b: 1}\n": "always gated",
    }
    bad = tmp_path / "course.yml"
    for body, error in cases.items():
        bad.write_text(head + "    " + body)
        with pytest.raises(CourseError, match=error):
            load_course(bad)
    bad.write_text(head.replace("points: 8", "points: 8.125") + "    checks: {test_a: 1}\n")
    with pytest.raises(CourseError, match="whole multiples"):
        load_course(bad)


def test_every_check_that_is_not_core_nor_standalone_is_gated():
    for component in load_course().components:
        assert component.core, f"{component.id} lists no core checks, so nothing of it is gated"
        assert set(component.gated) == set(component.checks) - set(component.core) - component.standalone


def _report(outcome) -> Report:
    """Every component scored from made-up cases: outcome(component, check) -> (cases passed, cases run)."""
    components = []
    for component in load_course().components:
        cases = []
        for check in component.checks:
            passed, total = outcome(component, check)
            cases += [CaseResult(f"{check}[{i}]", check, component.id, PASSED if i < passed else FAILED, "wrong")
                      for i in range(total)]
        components.append(_score_component(component, cases, {}))
    return Report("made-up", components)


def _sums(report: Report) -> tuple[dict[str, Decimal], dict[str, Decimal], Decimal]:
    """(max_score, score) per component and the top-level score, as results.json writes them, added exactly."""
    results = json.loads(json.dumps(to_gradescope(report)), parse_float=Decimal)
    maxima: dict[str, Decimal] = {}
    scores: dict[str, Decimal] = {}
    for test in results["tests"]:
        maxima[test["tags"][0]] = maxima.get(test["tags"][0], Decimal(0)) + Decimal(test["max_score"])
        scores[test["tags"][0]] = scores.get(test["tags"][0], Decimal(0)) + Decimal(test["score"])
    return maxima, scores, Decimal(results["score"])


def test_checks_points_add_up_exactly_to_each_component_and_to_the_total():
    course = load_course()
    for component in course.components:
        assert sum(component.check_units().values()) == round(component.points * POINT_UNITS)
    maxima, scores, total = _sums(_report(lambda component, check: (3, 3)))
    assert maxima == {c.id: Decimal(str(c.points)) for c in course.components}
    assert scores == maxima and sum(maxima.values()) == total == Decimal(str(course.total_points))
    report = _report(lambda component, check: (3, 3))
    assert [format_points(c.score, c.max_score) for c in report.components] == [f"{c.points:g}/{c.points:g}" for c in course.components]
    assert format_points(report.score, report.max_score) == f"{course.total_points:g}/{course.total_points:g}"


def test_partial_credit_adds_up_to_what_each_component_reports():
    maxima, scores, total = _sums(_report(lambda component, check: (len(check) % 3, 3)))
    report = _report(lambda component, check: (len(check) % 3, 3))
    assert {c.id: Decimal(format_points(c.score, c.max_score).split("/")[0]) for c in report.components} == scores
    assert sum(scores.values()) == total


def test_gated_checks_pay_as_far_as_the_core_checks_do():
    component = load_course().component("head_splitting")
    half = {"test_split_heads_layout": (5, 10), "test_merge_heads_layout": (5, 10)}
    report = _report(lambda c, check: half.get(check, (1, 1)) if c is component else (1, 1))
    checks = {c.name: c for c in report.components[[c.id for c in report.components].index("head_splitting")].checks}
    assert checks["test_round_trip"].status == PASSED
    assert checks["test_round_trip"].score == pytest.approx(checks["test_round_trip"].max_score / 2)
    assert checks["test_round_trip"].gated.startswith("gated: pays once test_split_heads_layout, test_merge_heads_layout")
    nothing = _report(lambda c, check: (0, 1) if c is component and check in half else (1, 1))
    scored = next(c for c in nothing.components if c.id == "head_splitting")
    assert scored.score == 0 and all(c.gated for c in scored.checks if c.name not in half)
