"""A student release grades correct code exactly as `grade` does, and trivial code no higher.

Inside a release every component runs with the student's own code for the others (no trusted
stand-ins), so a component's checks there also run the rest of the submission: a correct
submission written differently (every `selftests/alternatives/` folder) must get the same score
per component both ways; the trivial catalogue (`selftests/trivial/`), whose code does no work
anywhere, earns only a correct __init__'s points both ways, and passes the same cases wherever a
component runs no other's code. `grade`'s side is the `graded` and `trivial` fixtures (conftest.py); the release's
is the bundle's own grader, run on each folder as the bundle's `check --target` does.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.channels.package.release import context_dependents
from grader.course import load_course
from selftests.bugs import alternative_names, materialize_alternative
from selftests.conftest import grade_folders
from selftests.trivial import KINDS, materialize as materialize_trivial

ROOT = Path(__file__).resolve().parent.parent
GRADE_MANY = """
import json, sys
from grader.engine.runner import run_checks
out, *folders = sys.argv[1:]
json.dump({f: run_checks(f, processes=1).to_dict() for f in folders}, open(out, "w"))
"""


DROPPED = ("PYTHONPATH", "DRILLS_TARGET")  # the bundle's grader, not this checkout's, nor a learner's target


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED}
    return {**env, "PYTHONDONTWRITEBYTECODE": "1"}


def grade_in_release(bundle: Path, folders: list[Path], out_dir: Path) -> dict[str, dict]:
    """{folder: report} from the bundle's grader, in processes side by side."""
    return grade_folders(folders, out_dir, command=(sys.executable, "-c", GRADE_MANY), cwd=bundle, drop=DROPPED)


@pytest.fixture(scope="module")
def in_release(tmp_path_factory) -> dict[str, dict]:
    """The release's report of every alternative ('alternative:NAME') and trivial kind ('trivial:KIND')."""
    base = tmp_path_factory.mktemp("release-grades")
    bundle = base / "bundle"
    made = subprocess.run([sys.executable, "-m", "grader", "release", str(bundle)], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    folders = {f"alternative:{name}": materialize_alternative(name, base / f"alt__{name}")
               for name in alternative_names()}
    folders.update({f"trivial:{kind}": materialize_trivial(kind, base / f"trivial__{kind}") for kind in KINDS})
    reports = grade_in_release(bundle, list(folders.values()), base)
    return {label: reports[str(folder)] for label, folder in folders.items()}


def _scores(report: dict) -> dict[str, float]:
    return {c["id"]: round(c["score"], 6) for c in report["components"]}


def _unequal(through_grade: dict, in_release: dict) -> dict[str, tuple[float, float]]:
    want, got = _scores(through_grade), _scores(in_release)
    return {c: (want.get(c), got.get(c)) for c in set(want) | set(got) if want.get(c) != got.get(c)}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("name", alternative_names())
def test_a_correct_alternative_gets_full_marks_in_a_release_as_through_grade(graded, in_release, name):
    label = f"alternative:{name}"
    assert _unequal(graded[label], in_release[label]) == {}, "component: (grade, release)"
    assert in_release[label]["score"] == pytest.approx(load_course().total_points)


def _passed(report: dict) -> dict[str, int]:
    """'component:check' -> cases passed, of every check."""
    return {f"{c['id']}:{k['name']}": k["cases_passed"] for c in report["components"] for k in c["checks"]}


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("kind", KINDS)
def test_trivial_code_grades_in_a_release_as_through_grade(trivial, in_release, kind):
    """In a release trivial code earns only what a correct __init__ earns, as through grade; every public check
    passes as many cases as through grade, but for components that run another's code (context_dependents),
    which the release runs trivial there too and so may pass fewer; and a component without hidden checks that
    runs no other's code scores the same (the release leaves hidden checks out, so there a passing check's share
    of the points is larger)."""
    course = load_course()
    through_grade, released = trivial[kind], in_release[f"trivial:{kind}"]
    allowed = {f"{c.id}:{name}" for c in course.components for name in c.standalone}
    paid = {f"{c['id']}:{k['name']}" for c in released["components"] for k in c["checks"] if k["score"] > 0}
    assert paid - allowed == set(), "a release pays trivial code for these checks"
    in_context = set().union(*(context_dependents(c.id) for c in course.components))
    want, got = _passed(through_grade), _passed(released)
    differ = {k: (want[k], got[k]) for k in got if k in want and got[k] != want[k]
              and not (k.partition(":")[0] in in_context and got[k] < want[k])}
    assert differ == {}, "check: (cases passed through grade, in a release)"
    alone = {c.id for c in course.components if not c.hidden and c.id not in in_context}
    assert {c: v for c, v in _unequal(through_grade, released).items() if c in alone} == {}, \
        "component: (grade, release)"
