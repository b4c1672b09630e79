"""course.yml agrees with the contract and with the check files."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from grader.course import CourseError, load_course

ROOT = Path(__file__).resolve().parent.parent


def check_names(component: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / f"test_{component}.py").read_text())
    return {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


# The core track (the first nine components) is worth 100 points; the LLM track's points come on top.
CORE_TRACK = COMPONENTS[:COMPONENTS.index("kv_cache") + 1]


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
    bad.write_text("components:\n  - id: attention\n    title: x\n    file: a.py\n    points: 5\n    checks: {t: 1}\n")
    with pytest.raises(CourseError, match="not a component"):
        load_course(bad)
    bad.write_text("components: [\n")
    with pytest.raises(CourseError, match="not valid YAML"):
        load_course(bad)
