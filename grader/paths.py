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
