"""`python -m grader grade-all SUBMISSIONS --out DIR [--jobs N]`: grade a class.

SUBMISSIONS holds one folder per student (the folder's name is the student);
the exercise files may sit anywhere inside it. Each student is graded with
`run_checks` in one of N long-lived job processes (each keeps its zygote, so a
student costs only the checks), and the result is written atomically to
DIR/results/<student>.json as soon as it is known. DIR/gradebook.csv
(student, total, status, one column per component) is rebuilt from those files at the
end, and after an interrupt.

Resuming: a student whose results file exists and whose submission (and the
checks) are unchanged is skipped, so a second run, or a run after Ctrl-C,
grades only what is left. Identical submissions (e.g. untouched stubs) are
graded once. A submission that crashes or hangs a job process is recorded with
status "error" and 0 points, the job is restarted, and the batch goes on.

Notebook submissions (.ipynb) are not graded yet: such a student is recorded
with status "error" and a message saying so.
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from ...paths import ROOT
from ..commands import add_accept_protection
from .discovery import Student, discover, grader_fingerprint
from .job import Job
from .records import dump, error_record, read_record, record_status, write_gradebook
from .schedule import Schedule, component_keys
from ...files import write_atomic
from ...inert import visible

JOB_COMMAND = [sys.executable, "-m", "grader.channels.batch.serve"]


class _Progress:
    """A rich progress bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done = total, done
        self.bar = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.description}", markup=False), console=Console(file=sys.stderr))
            self.task = self.bar.add_task("", total=total, completed=done)
            self.bar.start()

    def advance(self, line: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=line)
        else:
            print(f"[{self.done}/{self.total}] {line}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()


class _Batch:
    """One run of grade-all: who is left, who finished, and the jobs grading them."""

    def __init__(self, out: Path, students: list[Student], skipped: int) -> None:
        self.out = out
        self.progress = _Progress(len(students), skipped)
        self.known: dict[str, dict] = {}  # what finished in this run, for the gradebook
        self.errors: list[str] = []
        self.graded = self.copied = 0
        self.lock = threading.Lock()
        self.waiting: dict[str, list[Student]] = {}  # fingerprint -> students handing in the same as one being graded
        self.stop = threading.Event()
        self.crashed: list[BaseException] = []

    def results_file(self, student: Student) -> Path:
        return self.out / "results" / f"{student.name}.json"

    def finish(self, student: Student, record: dict, copy: bool = False, written: bool = False) -> None:
        if not written:
            write_atomic(self.results_file(student), dump(record))
        with self.lock:
            self.known[student.name] = {"score": record["score"], "components": record["components"],
                                        "gradebook_status": record_status(record)}
            if record["status"] == "error":
                self.errors.append(student.name)
            elif copy:
                self.copied += 1
            else:
                self.graded += 1
            self.progress.advance(visible(f"{student.name}: {record['score']:g}/{record['max_score']:g}"
                                          + (f" (error: {record['error'][:60]})" if record["status"] == "error" else "")))

    def copy_of(self, student: Student, record: dict) -> None:
        self.finish(student, {**record, "student": student.name}, copy=True)

    def run(self, job: Job, schedule: Schedule, jobs: int, student_timeout: float) -> None:
        """A thread's loop: grade with `job` until the schedule runs dry or the batch stops."""
        try:
            job.start()  # torch loads meanwhile
            while (taken := schedule.take(self.stop)) is not None:
                self._grade(job, schedule, *taken, jobs, student_timeout)
                if self.stop.is_set():
                    return
        except BaseException as exc:
            if not self.stop.is_set():  # a bug here: stop the batch, and say so (after the gradebook is written)
                self.crashed.append(exc)  # (once stopping, the job it waited on may be killed under it: no news)
                self.stop.set()

    def _grade(self, job: Job, schedule: Schedule, student: Student, alone: bool, jobs: int,
               student_timeout: float) -> None:
        path = self.results_file(student)
        task = {"student": student.name, "folder": str(student.folder), "fingerprint": student.fingerprint,
                "out": str(path)}
        if alone:  # the other jobs can only wait for this one (the first of a class, say): lend it their cores
            task["processes"] = jobs
        failure = job.grade(task, student_timeout)
        schedule.done(student)
        if self.stop.is_set():
            return
        record = read_record(path) if failure is None else None
        written = record is not None and record.get("fingerprint") == student.fingerprint  # by the job
        if not written:
            record = error_record(student.name, student.fingerprint, failure or "the grader wrote no results")
        self.finish(student, record, written=written)
        for twin in self.waiting.pop(student.fingerprint, []):
            self.copy_of(twin, record)


def _job_env(out: Path, cache: bool, check_timeout: float | None) -> dict:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if check_timeout:
        env["DRILLS_BATCH_TIMEOUT"] = str(check_timeout)
    if cache:  # components whose files match ones graded before reuse those results (grader/engine/cache.py)
        env["DRILLS_BATCH_CACHE"] = str(out / "cache")
    return env


def grade_all(submissions: Path, out: Path, *, jobs: int = 2, force: bool = False, dedupe: bool = True,
              cache: bool = True, student_timeout: float = 900.0, check_timeout: float | None = None,
              job_command: list[str] | None = None) -> dict:
    """Grade every student folder in `submissions` into `out`; returns a summary."""
    submissions, out = Path(submissions).resolve(), Path(out).resolve()
    if not submissions.is_dir():
        raise FileNotFoundError(f"no such folder: {submissions}")
    (out / "results").mkdir(parents=True, exist_ok=True)
    (out / "logs").mkdir(exist_ok=True)
    started = time.perf_counter()
    students = discover(submissions, grader_fingerprint())
    done: dict[str, dict] = {}  # fingerprint -> a record graded before, which its twins may copy
    todo: list[Student] = []
    for student in students:
        record = None if force else read_record(out / "results" / f"{student.name}.json")
        if record is not None and record.get("fingerprint") == student.fingerprint:
            if record["status"] == "graded":
                done.setdefault(student.fingerprint, record)
            continue
        todo.append(student)
    batch = _Batch(out, students, len(students) - len(todo))
    # Students that need a job: unique submissions only; the duplicates reuse their results.
    unique: dict[str, Student] = {}
    for student in todo:
        if student.folder is None:
            batch.finish(student, error_record(student.name, student.fingerprint, student.problem))
        elif dedupe and student.fingerprint in done:
            batch.copy_of(student, done[student.fingerprint])
        elif dedupe and student.fingerprint in unique:
            batch.waiting.setdefault(student.fingerprint, []).append(student)
        else:
            unique[student.fingerprint] = student
    keys: dict[str, frozenset[str]] = {}
    schedule = Schedule(list(unique.values()),
                        (lambda s: keys.get(s.name) or keys.setdefault(s.name, component_keys(s))) if cache else None)
    env = _job_env(out, cache, check_timeout)
    pool = [Job(i, job_command or JOB_COMMAND, out / "logs" / f"job-{i}.log", env)
            for i in range(max(1, min(jobs, len(schedule) or 1)))]
    threads = [threading.Thread(target=batch.run, args=(job, schedule, len(pool), student_timeout), daemon=True)
               for job in pool]
    interrupted = False
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        interrupted = True
        batch.stop.set()
    finally:
        for job in pool:
            job.kill() if interrupted else job.close()
        batch.progress.stop()
        gradebook = write_gradebook(out, [s.name for s in students], batch.known)
    if batch.crashed:
        raise batch.crashed[0]
    return {"students": len(students), "graded": batch.graded, "copied": batch.copied,
            "skipped": len(students) - len(todo), "errors": batch.errors, "interrupted": interrupted,
            "gradebook": str(gradebook), "seconds": time.perf_counter() - started}


def _grade_all(args: argparse.Namespace) -> int:
    from ...errors import GraderError
    from ...sandbox.confine import choose
    from ...engine.runner import require_protection

    try:  # before any job starts: below the intended protection, the class is not graded at all
        require_protection(choose())
    except GraderError as exc:
        print(f"grade-all: {exc}", file=sys.stderr)
        return 3
    try:
        summary = grade_all(Path(args.submissions), Path(args.out), jobs=args.jobs, force=args.force,
                            dedupe=not args.no_dedupe, cache=not args.no_cache, student_timeout=args.student_timeout,
                            check_timeout=args.timeout)
    except FileNotFoundError as exc:
        print(f"grade-all: {exc}", file=sys.stderr)
        return 2
    print(f"{summary['students']} students: {summary['graded']} graded, {summary['copied']} identical to another (results copied), "
          f"{summary['skipped']} already done, {len(summary['errors'])} not graded, "
          f"in {summary['seconds']:.1f} s; gradebook: {summary['gradebook']}")
    if summary["errors"]:
        print("not graded (see results/<student>.json): " + visible(", ".join(summary["errors"])))
    if summary["interrupted"]:
        print("interrupted: run the same command again to grade the rest", file=sys.stderr)
        return 130
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("grade-all", help="grade a folder of submissions (one subfolder per student)")
    parser.add_argument("submissions", metavar="SUBMISSIONS")
    parser.add_argument("--out", required=True, metavar="DIR", help="results/<student>.json and gradebook.csv go here")
    parser.add_argument("--jobs", type=int, default=2, metavar="N", help="grading processes (default 2)")
    parser.add_argument("--force", action="store_true", help="grade everyone again, even those already done")
    parser.add_argument("--no-dedupe", action="store_true", help="grade identical submissions separately")
    parser.add_argument("--no-cache", action="store_true",
                        help="grade every component afresh (by default a component whose files match one graded "
                             "before, in this output folder, reuses its results)")
    parser.add_argument("--student-timeout", type=float, default=900.0, metavar="S",
                        help="seconds one student may take before the job is stopped (default 900)")
    parser.add_argument("--timeout", type=float, metavar="S", help="seconds per check (default: course.yml)")
    add_accept_protection(parser)
    parser.set_defaults(func=_grade_all)
