"""A grading process collects the check files of its share, and only those, and runs them in the planner's order."""
from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from grader.engine.plugin import Shard, Submission
from grader.paths import CHECKS_DIR
from grader.sandbox.confine import NONE, Plan
from grader.sandbox.protocol import Limits

LIMITS = Limits(timeout_s=10, memory_mb=1000)


class Collected:
    """A pytest plugin that keeps the check files of the session's items, in their order."""

    files: list[str] = []

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.files = list(dict.fromkeys(item.path.name for item in session.items))


def collect(files: list[Path]) -> tuple[int, list[str]]:
    shard = Shard(files, Submission(str(CHECKS_DIR), Plan.for_copy(NONE, CHECKS_DIR), LIMITS))
    collected = Collected()
    with redirect_stdout(io.StringIO()):
        code = pytest.main([*shard.args, "--collect-only"], plugins=[shard, collected])
    return code, collected.files


def test_a_shard_collects_its_files_only_in_the_order_given():
    files = [CHECKS_DIR / "test_scaling.py", CHECKS_DIR / "test_masking.py", CHECKS_DIR / "test_rope.py"]
    code, collected = collect(files)
    assert code == pytest.ExitCode.OK
    assert collected == ["test_scaling.py", "test_masking.py", "test_rope.py"]


def test_a_missing_check_file_is_an_error_not_a_file_left_out():
    code, _ = collect([CHECKS_DIR / "test_scaling.py", CHECKS_DIR / "test_nothing_here.py"])
    assert code == pytest.ExitCode.USAGE_ERROR
