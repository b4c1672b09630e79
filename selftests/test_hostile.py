"""Hostile submissions: the grader always finishes, writes its report, and gives no unearned point."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from selftests.hostile import ATTACKS, conftest_attack

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 3
pytestmark = pytest.mark.timeout(900)


@dataclass
class Graded:
    returncode: int
    stderr: str
    scores: dict[str, float]
    outputs: dict[str, list[str]]
    seconds: float
    evidence: Path


def grade(submission: Path, evidence: Path) -> Graded:
    results = submission.parent / "results.json"
    started = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "grader", "grade", str(submission), "--results", str(results), "--timeout", str(TIMEOUT_S)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )
    seconds = time.monotonic() - started
    data = json.loads(results.read_text())
    scores: dict[str, float] = {}
    outputs: dict[str, list[str]] = {}
    for test in data["tests"]:
        scores[test["tags"][0]] = scores.get(test["tags"][0], 0.0) + test["score"]
        outputs.setdefault(test["tags"][0], []).append(test["output"])
    assert data["score"] == pytest.approx(sum(scores.values()), abs=0.01)
    return Graded(result.returncode, result.stderr, scores, outputs, seconds, evidence)


def evidence_folder(base: Path, name: str) -> Path:
    """A folder any user can reach and write, where attacks leave their pids and successes."""
    folder = base / name
    folder.mkdir()
    folder.chmod(0o777)
    return folder


@pytest.fixture(scope="session")
def hostile():
    """Every attack graded once, two at a time (these machines have two cores)."""
    base = Path(tempfile.mkdtemp(prefix="drills-hostile-"))
    base.chmod(0o755)
    jobs = {}
    for attack in ATTACKS:
        evidence = evidence_folder(base, f"{attack.name}-evidence")
        jobs[attack.name] = (attack.materialize(base / attack.name / "submission", evidence), evidence)
    jobs["conftest"] = (conftest_attack(base / "conftest" / "submission"), evidence_folder(base, "conftest-evidence"))
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(grade, *job) for name, job in jobs.items()}
        graded = {name: future.result() for name, future in futures.items()}
    yield graded
    shutil.rmtree(base, ignore_errors=True)


def full_marks() -> dict[str, float]:
    from grader.course import load_course

    return {c.id: c.points for c in load_course().components}


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_earns_nothing_and_costs_only_its_component(hostile, attack):
    graded = hostile[attack.name]
    assert graded.returncode == 0, graded.stderr[-3000:]
    full = full_marks()
    for component in COMPONENTS:
        if component in attack.may_lose:
            assert graded.scores[component] < full[component], f"{attack.description}: {component} kept full marks"
        else:
            assert graded.scores[component] == pytest.approx(full[component], abs=0.01), \
                f"{attack.description}: {component} lost points: {graded.outputs[component]}"
    assert graded.seconds < 120, f"grading took {graded.seconds:.0f} s"
    leftovers = [int(p.name.removeprefix("pid-")) for p in graded.evidence.glob("pid-*")]
    assert not [pid for pid in leftovers if alive(pid)], "a process of the submission outlived grading"


def test_hang_is_reported_as_a_timeout_naming_the_function(hostile):
    outputs = hostile["hang"].outputs["head_splitting"]
    assert any(f"timed out after {TIMEOUT_S:g} s in `attention.split_heads`" in o for o in outputs), outputs


def test_crash_is_reported_as_a_crash(hostile):
    outputs = hostile["segfault"].outputs["scaling"]
    assert any("SIGSEGV" in o for o in outputs), outputs


def test_import_time_exit_is_reported_with_the_file(hostile):
    outputs = hostile["os_exit_at_import"].outputs["sinusoidal_encoding"]
    assert all("positional.py" in o for o in outputs), outputs


def test_stray_processes_were_started_and_are_gone(hostile):
    pids = [int(p.name.removeprefix("pid-")) for p in hostile["stray_process"].evidence.glob("pid-*")]
    assert pids, "the attack did not get to start its processes, so the test proves nothing"
    assert not [pid for pid in pids if alive(pid)]


def test_conftest_and_test_files_in_the_submission_are_ignored(hostile):
    graded = hostile["conftest"]
    assert graded.returncode == 0
    assert graded.scores["sinusoidal_encoding"] == 0
    assert graded.scores["head_splitting"] == pytest.approx(full_marks()["head_splitting"])


def test_worker_cannot_read_solutions_or_checks(tmp_path):
    base = Path(tempfile.mkdtemp(prefix="drills-evidence-"))
    base.chmod(0o755)
    evidence = evidence_folder(base, "evidence")
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
        f"open(_os.path.join({str(evidence)!r}, 'probe-ran'), 'w').close()\n"
    )
    (submission / "kv_cache.py").write_text(probe)
    graded = grade(submission, evidence)
    assert graded.scores == pytest.approx(full_marks(), abs=0.01)
    assert sorted(p.name for p in evidence.iterdir()) == ["probe-ran"]
    shutil.rmtree(evidence.parent, ignore_errors=True)
