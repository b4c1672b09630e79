"""The graded checks' fixtures and options live in the grader's engine (grader/engine/checks.py)."""
from grader.engine.checks import *  # noqa: F401,F403 - pytest finds the plugin's hooks and fixtures here
from grader.engine.checks import _targets  # noqa: F401 - a fixture the star leaves out
