"""`python -m grader grade-all`: per-student results, a gradebook, resuming, crashes recorded."""
from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from grader.channels.batch.command import grade_all
from grader.course import load_course

ROOT = Path(__file__).resolve().parent.parent
COMPONENTS = [c.id for c in load_course().components]
SCORES = "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"

CRASHING_JOB = f"""\
import os, sys
sys.path.insert(0, {str(ROOT)!r})
import grader.engine.runner as runner
real = runner.run_checks
def run_checks(folder, **kwargs):
    if os.path.basename(str(folder)) == "crasher":
        os.kill(os.getpid(), 9)  # the job process dies while grading this student
    return real(folder, **kwargs)
runner.run_checks = run_checks
from grader.channels.batch.serve import serve
serve()
"""


def _copy(source: Path, dest: Path) -> Path:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("__pycache__", "__init__.py"))
    return dest


@pytest.fixture(scope="module")
def klass(tmp_path_factory) -> Path:
    subs = tmp_path_factory.mktemp("class") / "submissions"
    _copy(ROOT / "solutions", subs / "alice")
    _copy(ROOT / "exercises", subs / "bob")
    _copy(ROOT / "exercises", subs / "carol")  # identical to bob
    dave = _copy(ROOT / "solutions", subs / "dave" / "zip" / "hw")  # nested, one bug in scaling
    (dave / "attention.py").write_text((dave / "attention.py").read_text().replace(SCORES, "return q @ k.transpose(-2, -1)"))
    crasher = _copy(ROOT / "solutions", subs / "crasher")
    (crasher / "vit.py").write_text((crasher / "vit.py").read_text() + "\n# my own work\n")  # not alice's copy
    (subs / "eve").mkdir()
    (subs / "eve" / "notes.txt").write_text("nothing to grade")
    return subs


@pytest.fixture(scope="module")
def graded(klass, tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    job = out.parent / "crashing_job.py"
    job.write_text(CRASHING_JOB)
    summary = grade_all(klass, out, jobs=2, job_command=[sys.executable, str(job)])
    return out, summary


def _gradebook(out: Path) -> dict[str, dict[str, str]]:
    with open(out / "gradebook.csv") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["student", "total", "status", *COMPONENTS]
    return {row["student"]: row for row in rows}


@pytest.mark.timeout(300)
def test_gradebook_and_per_student_results(graded):
    out, summary = graded
    book = _gradebook(out)
    assert set(book) == {"alice", "bob", "carol", "dave", "crasher", "eve"}
    assert float(book["alice"]["total"]) == pytest.approx(load_course().total_points)
    assert float(book["bob"]["total"]) == 0 and float(book["carol"]["total"]) == 0
    dave = {c: float(book["dave"][c]) for c in COMPONENTS}
    points = {c.id: c.points for c in load_course().components}
    assert dave["scaling"] < points["scaling"]
    assert all(dave[c] == pytest.approx(points[c]) for c in COMPONENTS if c != "scaling")
    assert float(book["dave"]["total"]) == pytest.approx(sum(dave.values()), abs=1e-3)
    for name in book:
        record = json.loads((out / "results" / f"{name}.json").read_text())
        assert record["student"] == name
        assert set(record["results"]) >= {"score", "tests"}  # Gradescope's schema, per student
    assert summary["copied"] == 1  # carol's stubs are bob's: graded once


@pytest.mark.timeout(300)
def test_a_crashing_submission_is_recorded_and_the_batch_goes_on(graded):
    out, summary = graded
    crasher = json.loads((out / "results" / "crasher.json").read_text())
    assert crasher["status"] == "error" and "crashed" in crasher["error"] and crasher["score"] == 0
    eve = json.loads((out / "results" / "eve.json").read_text())
    assert eve["status"] == "error" and "no exercise files" in eve["error"]
    assert set(summary["errors"]) == {"crasher", "eve"}
    assert float(_gradebook(out)["alice"]["total"]) == pytest.approx(load_course().total_points)  # graded after or alongside the crash


@pytest.mark.timeout(300)
def test_second_run_skips_finished_students_and_regrades_a_changed_one(graded, klass):
    out, _ = graded
    before = {p.name: p.stat().st_mtime_ns for p in (out / "results").glob("*.json")}
    summary = grade_all(klass, out, jobs=2)
    assert summary["skipped"] == 6 and summary["graded"] == 0 and summary["seconds"] < 10
    assert {p.name: p.stat().st_mtime_ns for p in (out / "results").glob("*.json")} == before
    dave = klass / "dave" / "zip" / "hw" / "attention.py"
    original = dave.read_text()
    try:
        dave.write_text(original.replace("return q @ k.transpose(-2, -1)\n", f"{SCORES}\n"))
        summary = grade_all(klass, out, jobs=2)
        assert summary["graded"] + summary["copied"] == 1 and summary["skipped"] == 5  # now identical to alice
        assert float(_gradebook(out)["dave"]["total"]) == pytest.approx(load_course().total_points)
    finally:
        dave.write_text(original)


@pytest.mark.timeout(300)
def test_an_interrupt_loses_nothing_finished(tmp_path):
    subs = tmp_path / "subs"
    for i in range(4):
        _copy(ROOT / "solutions", subs / f"s{i}")
        (subs / f"s{i}" / "block.py").write_text((subs / f"s{i}" / "block.py").read_text() + f"\n# student {i}\n")
    out = tmp_path / "out"
    # --no-cache: the students differ only by a comment, so cached results would finish them all at once;
    # --timeout 60: on a loaded machine a check of correct code may pass its 10 s, and this is about what is kept
    proc = subprocess.Popen([sys.executable, "-m", "grader", "grade-all", str(subs), "--out", str(out), "--jobs", "1",
                             "--no-cache", "--timeout", "60"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # Ctrl-C as a terminal gives it: a suite run in the background (`.ci/run &`, nohup)
                            # passes SIGINT on ignored, and Python then installs no handler (the run went on)
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    # Wait for the first progress line (plain lines when not on a terminal), written after that student's
    # results file; waiting for the file alone raced the line.
    seen = []
    while not any("[1/4]" in line for line in seen):
        line = proc.stderr.readline()
        assert line, "".join(seen)
        seen.append(line)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    stderr = "".join(seen) + stderr
    assert proc.returncode == 130, stderr
    finished = sorted(p.stem for p in (out / "results").glob("s*.json"))
    assert 1 <= len(finished) < 4
    for name in finished:
        text = (out / "results" / f"{name}.json").read_text()
        assert json.loads(text)["score"] == pytest.approx(load_course().total_points), (name, text[:3000], stderr)
    assert sorted(_gradebook(out)) == finished
    assert not [p for p in (out / "results").iterdir() if p.name.startswith(".")]  # no half-written files



META_WORKER = f"""\
import sys, time
sys.path.insert(0, {str(ROOT)!r})
from grader.sandbox.confine import Plan
from grader.sandbox.handle import Worker
from grader.sandbox.protocol import Limits
from grader.sandbox.zygote import ZYGOTE
ZYGOTE.start()
for folder in sys.argv[1:]:
    worker = Worker(Plan.for_copy("none", folder), None, Limits(timeout_s=10.0, memory_mb=2048))
    reply = worker.request({{"op": "call", "name": "attention.causal_mask", "args": (3,), "kwargs": {{}}}},
                           time.monotonic() + 30)
    worker.kill()
    print("error" in reply, ZYGOTE.meta_loaded)
"""


def test_a_worker_computing_on_meta_is_noticed(tmp_path):
    """A job warms its zygote for the meta device once a student's code needed it (and not before)."""
    import tempfile

    # somewhere workers can read when they run as an unprivileged user (grading as root)
    with tempfile.TemporaryDirectory(prefix="drills-meta-") as shared:
        Path(shared).chmod(0o755)
        for name, device in (("cpu", "cpu"), ("meta", "meta")):
            (Path(shared) / name).mkdir(mode=0o755)
            (Path(shared) / name / "attention.py").write_text(
                f"import torch\ndef causal_mask(q_len, k_len=None, *, device=None):\n"
                f"    return torch.ones(q_len, q_len, dtype=torch.bool, device={device!r}).tril()\n")
            (Path(shared) / name / "attention.py").chmod(0o644)
        script = tmp_path / "meta_worker.py"
        script.write_text(META_WORKER)
        proc = subprocess.run([sys.executable, str(script), f"{shared}/cpu", f"{shared}/meta"],
                              capture_output=True, text=True, timeout=120)
    assert proc.stdout.split() == ["False", "False", "False", "True"], proc.stdout + proc.stderr


def test_one_session_grades_each_student_as_if_alone(tmp_path):
    """grade-all's jobs grade student after student in one pytest session: nothing may carry over."""
    from grader.engine.runner import limits_for, run_checks
    from grader.engine.session import serve_in_session
    from selftests.hostile import ATTACKS

    folders = {"stubs": _copy(ROOT / "exercises", tmp_path / "stubs"),
               "correct": _copy(ROOT / "solutions", tmp_path / "correct")}
    for attack in ATTACKS:
        if attack.name in ("hang", "segfault", "os_exit_at_import"):
            evidence = tmp_path / f"{attack.name}-evidence"
            evidence.mkdir()
            folders[attack.name] = attack.materialize(tmp_path / attack.name, evidence)

    def summary(report) -> list:
        return [(c.id, c.status, round(c.score, 6), [(k.name, k.status, k.message) for k in c.checks])
                for c in report.components]

    alone = {name: summary(run_checks(folder, timeout=2, processes=1)) for name, folder in folders.items()}
    shared: dict[str, list] = {}
    order = ["hang", "correct", "segfault", "stubs", "os_exit_at_import", "correct"]
    serve_in_session(iter(order), lambda name, session: shared.setdefault(name, []).append(
        summary(run_checks(folders[name], timeout=2, session=session))), limits_for(timeout=2))
    for name in order:
        assert all(got == alone[name] for got in shared[name]), name


def test_no_two_jobs_grade_the_same_component_code_at_once():
    """The schedule holds back a student whose code for a component another job is grading right now."""
    import threading

    from grader.channels.batch.discovery import Student
    from grader.channels.batch.schedule import Schedule as _Schedule

    code = {"first": {"attention=A", "vit=A"}, "twin": {"attention=A", "vit=A"}, "stubs": {"attention=S", "vit=S"},
            "buggy": {"attention=B", "vit=A"}}
    students = [Student(name, Path(name), name) for name in code]
    schedule = _Schedule(students, lambda s: frozenset(code[s.name]))
    stop = threading.Event()
    first, alone = schedule.take(stop)
    assert (first.name, alone) == ("first", False)  # the stubs could be graded meanwhile
    stubs, alone = schedule.take(stop)
    assert (stubs.name, alone) == ("stubs", False)  # "first" is being graded
    waited = []
    thread = threading.Thread(target=lambda: waited.append(schedule.take(stop)))
    thread.start()
    thread.join(0.3)
    assert thread.is_alive(), "twin and buggy share vit=A with first, which is being graded"
    schedule.done(first)
    thread.join(5)
    assert waited[0][0].name == "twin"  # its code is all graded now: the cache has it
    assert schedule.take(stop)[0].name == "buggy"
    assert schedule.take(stop) is None

    lone = _Schedule([Student("only", Path("only"), "only")], lambda s: frozenset({"x"}))
    assert lone.take(stop)[1] is True  # nothing else to grade: it may use the other jobs' cores


def test_a_thief_and_a_fifo_in_a_class(tmp_path):
    """The workers of a batch hold none of the checks' helpers (which compute correct tables), and a FIFO
    in one student's folder neither hangs the batch nor costs the others anything."""
    import os

    from selftests.hostile import thieves

    subs = tmp_path / "submissions"
    thieves.materialize("memory", subs / "mallory")
    thieves.materialize("search_disk", subs / "oscar")  # frank's correct files are one folder away
    frank = _copy(ROOT / "solutions", subs / "frank")
    (frank / "positional.py").unlink()
    os.mkfifo(frank / "positional.py")
    summary = grade_all(subs, tmp_path / "out", jobs=2, student_timeout=300)
    assert summary["errors"] == []
    book = _gradebook(tmp_path / "out")
    assert float(book["mallory"]["total"]) == 0
    assert float(book["oscar"]["total"]) == 0
    assert float(book["frank"]["sinusoidal_encoding"]) == 0
    assert float(book["frank"]["total"]) == pytest.approx(load_course().total_points - load_course().component("sinusoidal_encoding").points)
