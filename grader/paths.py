"""Where things are: the course repository (or a student release) that holds this grader."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRADER = ROOT / "grader"
STANDINS = GRADER / "sandbox" / "standins"  # the trusted stand-ins: answers, hidden from workers
CHECKS_DIR = ROOT / "tests"  # the graded checks, one file per component: test_<component>.py
EXERCISES = ROOT / "exercises"  # the learner's stubs
SOLUTIONS = ROOT / "solutions"  # the reference (never in a release)
COURSE_FILE = ROOT / "course.yml"
PYPROJECT = ROOT / "pyproject.toml"
LAUNCHER = ROOT / "kit.py"  # the set-up and commands on every platform, without make


def has_course() -> bool:
    """Whether the course is beside this grader's package (course.yml and the checks): in a checkout or a student
    release, run from there or installed with `pip install -e`. Installed with `pip install .`, the package sits
    in site-packages with no course beside it."""
    return COURSE_FILE.is_file() and CHECKS_DIR.is_dir()
