"""A check that runs past the session's last-resort deadline fails as timed out, and the next check runs."""
from __future__ import annotations

import io
import signal
from contextlib import redirect_stdout

import pytest

from grader.engine import plugin
from grader.engine.plugin import Collector, LastResort, PlainFailures, Submission, Unlogged
from grader.paths import CHECKS_DIR
from grader.results import PASSED, TIMEOUT
from grader.sandbox.confine import NONE, Plan
from grader.sandbox.protocol import Limits

CHECKS = '''
import time
import pytest

pytestmark = pytest.mark.component("masking")


def test_overruns():
    time.sleep(5)


def test_runs_after():
    pass
'''


def test_a_check_past_the_last_resort_is_a_timeout_and_the_next_one_runs(tmp_path, monkeypatch):
    (tmp_path / "test_overrun.py").write_text(CHECKS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    component(id): the component a check grades\n")
    monkeypatch.setattr(plugin, "last_resort_s", lambda limits: 0.3)
    before = signal.getsignal(signal.SIGALRM)
    submission = Submission(str(CHECKS_DIR), Plan.for_copy(NONE, CHECKS_DIR), Limits(timeout_s=10, memory_mb=1000))
    collector = Collector()
    with redirect_stdout(io.StringIO()):
        pytest.main([str(tmp_path), "--rootdir", str(tmp_path), "-p", "no:cacheprovider", "-p", "no:warnings", "-q"],
                    plugins=[collector, PlainFailures(), Unlogged(), LastResort(submission)])
    cases = {case.check: case for case in collector.cases.values()}
    assert cases["test_overruns"].status == TIMEOUT and cases["test_overruns"].message == plugin.OVERRUN
    assert cases["test_runs_after"].status == PASSED
    assert signal.getsignal(signal.SIGALRM) == before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
