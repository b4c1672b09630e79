"""The graded checks' fixtures and options live in the grader's engine (grader/engine/checks.py)."""
import importlib

import pytest

from grader.engine.checks import *  # noqa: F401,F403 - pytest finds the plugin's hooks and fixtures here
from grader.engine.checks import _targets  # noqa: F401 - a fixture the star leaves out
from grader.sandbox.protocol import StudentError, WeightsMismatch


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    """An error of student code that no check caught, whose words name a known mistake (torch's "view size is
    not compatible ...", say), fails the check naming that mistake."""
    try:
        return (yield)
    except StudentError as exc:
        from checklib.compare import diagnosed
        from checklib.mistakes.general import error_mistake, sequential_shifted

        marker = item.get_closest_marker("component")
        # the component's own mistakes that an error names, where its module of mistakes recognises some
        own = getattr(importlib.import_module(f"checklib.mistakes.{marker.args[0]}"), "named_error", None) \
            if marker else None
        known = (error_mistake(exc.message, exc.where, exc.kinds, own,
                               checks_own_inputs=not getattr(exc, "made_by_student", False))
                 if type(exc) is StudentError else sequential_shifted(exc.message)
                 if type(exc) is WeightsMismatch else None)
        if known is None:
            raise
        raise diagnosed(exc.describe(), known) from None
