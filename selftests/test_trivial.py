"""Code that does no work earns nothing: the trivial catalogue (selftests/trivial/) is paid only for __init__.

course.yml's `standalone:` lists are the one place that names the checks a trivial
submission may pass for points: those of a correct `__init__` (layers, attribute names).
"""
from __future__ import annotations

import pytest

from grader.course import load_course
from selftests.trivial import KINDS

pytestmark = pytest.mark.timeout(900)  # the `trivial` fixture (conftest.py) grades the whole catalogue


@pytest.mark.parametrize("kind", KINDS)
def test_trivial_code_earns_only_the_standalone_checks(trivial, kind):
    course = load_course()
    report = trivial[kind]
    paid = {f"{c['id']}:{k['name']}": k["score"] for c in report["components"] for k in c["checks"] if k["score"] > 0}
    allowed = {f"{c.id}:{name}" for c in course.components for name in c.standalone}
    assert {name: score for name, score in paid.items() if name not in allowed} == {}, (
        f"the {kind} submission, which does no work, earns points from these checks")
    for component in report["components"]:
        standalone = course.component(component["id"]).standalone
        ceiling = sum(k["max_score"] for k in component["checks"] if k["name"] in standalone)
        assert component["score"] <= ceiling + 1e-9, f"{kind}: {component['id']} earns {component['score']}"


def test_gated_checks_say_why_they_paid_nothing(trivial):
    course = load_course()
    for component in trivial["zeros"]["components"]:
        gated = set(course.component(component["id"]).gated)
        for check in component["checks"]:
            if check["name"] in gated and check["cases_passed"]:
                assert check["score"] == 0 and check["gated"].startswith("gated: pays once "), check

