"""Hostile submissions: the grader always finishes, writes its report, and gives no unearned point."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from selftests.hostile import ATTACKS, conftest_attack

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 3


@pytest.fixture
def evidence():
    """A folder any user can write to, where attacks leave their pids and successes."""
    folder = Path(tempfile.mkdtemp(prefix="drills-evidence-"))
    folder.chmod(0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def grade(submission: Path, results: Path) -> tuple[subprocess.CompletedProcess, dict[str, float], float]:
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results), "--timeout", str(TIMEOUT_S)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    scores: dict[str, float] = {}
    data = json.loads(results.read_text())
    for test in data["tests"]:
        scores[test["tags"][0]] = scores.get(test["tags"][0], 0.0) + test["score"]
    assert data["score"] == pytest.approx(sum(scores.values()), abs=0.01)
    return result, scores, time.monotonic() - started


def full_marks() -> dict[str, float]:
    from grader.course import load_course

    return {c.id: c.points for c in load_course().components}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.timeout(300)
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_earns_nothing_and_costs_only_its_component(tmp_path, evidence, attack):
    submission = attack.materialize(tmp_path / "submission", evidence)
    results = tmp_path / "results.json"
    result, scores, seconds = grade(submission, results)
    assert result.returncode == 0, result.stderr[-3000:]
    full = full_marks()
    for component in COMPONENTS:
        if component in attack.may_lose:
            assert scores[component] < full[component], f"{attack.description}: {component} kept full marks"
        else:
            assert scores[component] == pytest.approx(full[component], abs=0.01), f"{attack.description}: {component} lost points"
    assert seconds < 120, f"grading took {seconds:.0f} s"
    leftovers = [int(p.name.removeprefix("pid-")) for p in evidence.glob("pid-*")]
    assert not [pid for pid in leftovers if alive(pid)], "a process of the submission outlived grading"


def test_hang_is_reported_as_a_timeout_naming_the_function(tmp_path):
    attack = next(a for a in ATTACKS if a.name == "hang")
    results = tmp_path / "results.json"
    grade(attack.materialize(tmp_path / "submission", tmp_path), results)
    outputs = [t["output"] for t in json.loads(results.read_text())["tests"] if t["tags"][0] == "head_splitting"]
    assert any(f"timed out after {TIMEOUT_S:g} s in `attention.split_heads`" in o for o in outputs), outputs


def test_crash_is_reported_as_a_crash(tmp_path):
    attack = next(a for a in ATTACKS if a.name == "segfault")
    results = tmp_path / "results.json"
    grade(attack.materialize(tmp_path / "submission", tmp_path), results)
    outputs = [t["output"] for t in json.loads(results.read_text())["tests"] if t["tags"][0] == "scaling"]
    assert any("SIGSEGV" in o for o in outputs), outputs


def test_conftest_and_test_files_in_the_submission_are_ignored(tmp_path):
    results = tmp_path / "results.json"
    result, scores, _ = grade(conftest_attack(tmp_path / "submission"), results)
    assert result.returncode == 0
    assert scores["sinusoidal_encoding"] == 0
    assert scores["head_splitting"] == pytest.approx(full_marks()["head_splitting"])


@pytest.mark.skipif(os.geteuid() != 0, reason="privileges are dropped only when grading as root")
def test_worker_cannot_read_solutions_or_write_results_as_root(tmp_path, evidence):
    from grader.worker import can_drop_privileges

    if not can_drop_privileges():
        pytest.skip("this Python installation is not readable by an unprivileged user")
    attack = next(a for a in ATTACKS if a.name == "forged_results")
    submission = attack.materialize(tmp_path / "submission", evidence)
    probe = (submission / "kv_cache.py").read_text() + (
        "\nimport os as _os\n"
        f"for _path in {str(ROOT / 'solutions' / 'attention.py')!r}, {str(ROOT / 'tests' / 'test_masking.py')!r}:\n"
        "    try:\n"
        "        open(_path).read()\n"
        f"        open(_os.path.join({str(evidence)!r}, 'read-' + _os.path.basename(_path)), 'w').close()\n"
        "    except OSError:\n"
        "        pass\n"
    )
    (submission / "kv_cache.py").write_text(probe)
    results = tmp_path / "results.json"
    grade(submission, results)
    assert sorted(p.name for p in evidence.iterdir()) == []
