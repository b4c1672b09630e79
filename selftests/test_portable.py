"""The portable path (issue 34 §1): workers started without fork grade as the forked ones do.

Where os.fork is missing (Windows) or unsafe after torch's import (macOS) the grader starts each worker as
`python -m grader.sandbox.worker` (grader/sandbox/spawner.py); `GRADER_WORKERS=spawn` picks that path on
Linux, which is how it is tested here: the reference, the stubs, one catalogue bug of each component, a hang
and a crash are graded both ways, and every component's score, status and checks must agree. Without a
sandbox, its protection is "none": said at the top of every report, warned about where a learner checks their
own code, refused where the grader grades others unless accepted.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.contract import COMPONENTS
from grader.course import load_course
from grader.errors import GraderError
from grader.sandbox import confine, spawner
from selftests.bugs import ROOT, all_bugs, materialize
from selftests.conftest import grade_folders
from selftests.hostile import ATTACKS

pytestmark = pytest.mark.timeout(1200)
SPAWN = {spawner.VARIABLE: spawner.SPAWN}
HANG, CRASH = "hang::head_splitting", "segfault::scaling"


def first_bug_of_each_component():
    bugs = {}
    for bug in all_bugs():
        bugs.setdefault(bug.component, bug)
    return [bugs[c] for c in COMPONENTS]


@pytest.fixture(scope="module")
def both_ways(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, dict]]:
    """{"fork" | "spawn": {label: report}} for the same folders graded both ways."""
    base = tmp_path_factory.mktemp("portable")
    folders: dict[str, str] = {"solutions": str(ROOT / "solutions"), "exercises": str(ROOT / "exercises")}
    for bug in first_bug_of_each_component():  # its own component only (the rest is the reference's)
        folders[f"bug:{bug.id}"] = f"{materialize(bug, base / bug.id.replace(':', '__'))}::{bug.component}"
    attacks = {attack.name: attack for attack in ATTACKS}
    for label in (HANG, CRASH):
        name, _, component = label.partition("::")
        folders[label] = f"{attacks[name].materialize(base / name, base / f'{name}-evidence')}::{component}"
    reports = {}
    accepted = {**SPAWN, confine.ACCEPT_VARIABLE: confine.NONE}  # (grade_many grades as for others)
    for way, env in (("fork", {spawner.VARIABLE: spawner.FORK}), ("spawn", accepted)):
        (base / way).mkdir()
        reports[way] = grade_folders(list(folders.values()), base / way, env, drop=(spawner.VARIABLE,))
    shutil.rmtree(base, ignore_errors=True)
    return {way: {label: graded[folder] for label, folder in folders.items()} for way, graded in reports.items()}


def outcome(report: dict) -> dict[str, tuple]:
    """component -> its score, status and each check's status and cases passed."""
    return {c["id"]: (c["score"], c["status"], [(k["name"], k["status"], k["cases_passed"]) for k in c["checks"]])
            for c in report["components"]}


def test_every_folder_scores_the_same_both_ways(both_ways):
    fork, spawn = both_ways["fork"], both_ways["spawn"]
    assert fork.keys() == spawn.keys()
    differ = {label: (outcome(fork[label]), outcome(spawn[label])) for label in fork
              if outcome(fork[label]) != outcome(spawn[label])}
    assert differ == {}


def test_the_portable_path_grades_the_reference_stubs_and_bugs(both_ways):
    spawn = both_ways["spawn"]
    assert spawn["solutions"]["score"] == pytest.approx(load_course().total_points)
    assert spawn["exercises"]["score"] == 0
    assert {c["status"] for c in spawn["exercises"]["components"]} == {"not started"}
    for bug in first_bug_of_each_component():
        component, = spawn[f"bug:{bug.id}"]["components"]
        assert component["score"] < component["max_score"], bug.id


def test_a_hang_and_a_crash_are_told_as_on_the_default_path(both_ways):
    spawn = both_ways["spawn"]
    hang = [k["message"] for c in spawn[HANG]["components"] for k in c["checks"]]
    assert any("timed out after" in m and "`attention.split_heads`" in m for m in hang), hang
    crash = [k["message"] for c in spawn[CRASH]["components"] for k in c["checks"]]
    assert any("SIGSEGV" in m for m in crash), crash


def test_the_protection_is_none_in_every_report_of_the_portable_path(both_ways):
    assert {r["protection"] for r in both_ways["spawn"].values()} == {confine.NONE}


def test_the_portable_path_is_refused_for_others_unless_accepted(monkeypatch):
    from grader.engine.runner import require_protection

    monkeypatch.setenv(spawner.VARIABLE, spawner.SPAWN)
    monkeypatch.delenv(confine.ACCEPT_VARIABLE, raising=False)
    monkeypatch.delenv("DRILLS_SANDBOX", raising=False)
    assert confine.choose() == confine.NONE
    with pytest.raises(GraderError, match="accept-protection none"):
        require_protection(confine.choose())  # grade, grade-all, the channels
    require_protection(confine.choose(), own_code=True)  # check: a warning
    monkeypatch.setenv(confine.ACCEPT_VARIABLE, confine.NONE)
    require_protection(confine.choose())


def test_the_method_is_fork_unless_asked_or_missing(monkeypatch):
    monkeypatch.delenv(spawner.VARIABLE, raising=False)
    assert spawner.method() == (spawner.SPAWN if sys.platform == "darwin" else spawner.FORK)
    monkeypatch.setenv(spawner.VARIABLE, "spawn")
    assert spawner.method() == spawner.SPAWN
    monkeypatch.setenv(spawner.VARIABLE, "fork")
    monkeypatch.delattr(os, "fork")
    assert spawner.method() == spawner.SPAWN  # (Windows)


def test_check_says_the_protection_at_the_top_and_grade_refuses_without_acceptance(tmp_path):
    env = {**os.environ, **SPAWN}
    env.pop(confine.ACCEPT_VARIABLE, None)
    env.pop("DRILLS_SANDBOX", None)
    check = subprocess.run([sys.executable, "-m", "grader", "check", "masking", "--target", "solutions"], cwd=ROOT,
                           env=env, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.splitlines()[0].startswith("WARNING: sandbox: NONE"), check.stdout
    assert "12/12" in check.stdout
    results = tmp_path / "results.json"
    for command in (["grade", "solutions", "--results", str(results), "--format", "json"],
                    ["grade-all", str(tmp_path), "--out", str(tmp_path / "out")]):
        refused = subprocess.run([sys.executable, "-m", "grader", *command], cwd=ROOT, env=env, capture_output=True,
                                 text=True, timeout=300)
        assert refused.returncode == 3 and "--accept-protection none" in refused.stderr, refused.stderr[-2000:]
    assert not results.exists() and not (tmp_path / "out").exists()


def test_frames_carry_messages_and_refuse_one_past_the_limit():
    from grader.sandbox.wire import Frames

    read_end, write_end = os.pipe()
    frames = Frames(read_end, write_end)
    frames.send_bytes(b"hello")
    frames.send_bytes(b"x" * 100)
    assert frames.recv_bytes(10) == b"hello"
    with pytest.raises(OSError):
        frames.recv_bytes(99)
    frames.close()
    read_end, write_end = os.pipe()
    os.write(write_end, (100).to_bytes(8, "little") + b"cut short")
    os.close(write_end)
    with pytest.raises(EOFError):  # the writer ended mid-message
        Frames(read_end, read_end).recv_bytes()
    os.close(read_end)


def test_a_worker_that_cannot_start_is_the_graders_error_with_its_words(monkeypatch):
    from grader.engine.runner import run_checks

    monkeypatch.setenv(spawner.VARIABLE, spawner.SPAWN)
    popen = subprocess.Popen
    failing = [sys.executable, "-c", "import sys; sys.exit('ImportError: no module named torch')"]
    monkeypatch.setattr(spawner.subprocess, "Popen", lambda args, **kwargs: popen(failing, **kwargs))
    component, = run_checks(ROOT / "solutions", ["masking"], own_code=True).components
    assert component.score == 0
    assert ("the grader could not start a worker process (a grader error, not yours): ImportError: no module named "
            "torch") in component.message


# --- issue 34 §2: nothing on the portable path assumes fcntl, resource or termios (Windows has none of them) -----

BLOCKER = '''import sys
BLOCKED = {"fcntl", "resource", "termios"}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ImportError(f"no module named {name!r} (as on Windows)")
        return None
sys.meta_path.insert(0, Block())
'''
IMPORT_ALL = '''import importlib, pkgutil, sys
import grader
failed = {}
for info in pkgutil.walk_packages(grader.__path__, "grader."):
    if not info.name.endswith("__main__"):
        try:
            importlib.import_module(info.name)
        except Exception as exc:
            failed[info.name] = f"{type(exc).__name__}: {exc}"
print(failed or "ok", sorted({"fcntl", "resource", "termios"} & set(sys.modules)))
'''


def _without_posix_modules(tmp_path: Path) -> dict[str, str]:
    """An environment whose Pythons (the grader's and its spawned workers') cannot import those modules."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, **SPAWN, "PYTHONPATH": path}
    env.pop(confine.ACCEPT_VARIABLE, None)
    return env


def test_every_grader_module_imports_without_fcntl_resource_and_termios(tmp_path):
    done = subprocess.run([sys.executable, "-c", IMPORT_ALL], cwd=ROOT, env=_without_posix_modules(tmp_path),
                          capture_output=True, text=True, timeout=300)
    assert done.stdout.strip() == "ok []", done.stdout + done.stderr[-2000:]


def test_the_portable_path_grades_without_fcntl_resource_and_termios(tmp_path):
    done = subprocess.run([sys.executable, "-m", "grader", "check", "masking", "scaling", "--target", "solutions"],
                          cwd=ROOT, env=_without_posix_modules(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "20/20" in done.stdout, done.stdout
