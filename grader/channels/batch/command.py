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
import csv
import hashlib
import io
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...source import FILES as SUBMISSION_FILES
from ...files import write_atomic
from ...paths import ROOT

EXERCISE_FILES = SUBMISSION_FILES
RECORD_VERSION = 1


@dataclass
class Student:
    name: str
    folder: Path | None  # the folder holding the exercise files; None when there is nothing to grade
    fingerprint: str
    problem: str = ""  # why it cannot be graded (then folder is None)


# --------------------------------------------------------------------------- submissions


def _grader_fingerprint() -> str:
    """Changes whenever the checks, the grader or the course change: results made before are then stale."""
    from ...engine.cache import grader_fingerprint

    return grader_fingerprint(str(ROOT / "tests"))[:16]


def _locate(folder: Path) -> Path | None:
    best = None
    for path in folder.rglob("*.py"):
        if path.name not in EXERCISE_FILES or "__MACOSX" in path.parts:
            continue
        parent = path.parent
        key = (-sum((parent / f).is_file() for f in EXERCISE_FILES), len(parent.relative_to(folder).parts), str(parent))
        best = key if best is None or key < best else best
    return Path(best[2]) if best else None


def _contents(path: Path) -> bytes:
    """A file's bytes for the fingerprint; a link, FIFO or huge file by what it is (never opened through)."""
    from ...source import UnreadableFile, read_file

    if not os.path.lexists(path):
        return b"<missing>"
    try:
        return read_file(path)
    except UnreadableFile as exc:
        return f"<{exc}>".encode()


def discover(submissions: Path, grader_fp: str) -> list[Student]:
    students = []
    for entry in sorted(Path(submissions).iterdir()):
        if not entry.is_dir() or entry.name.startswith((".", "_")):
            continue
        folder = _locate(entry)
        digest = hashlib.sha256(grader_fp.encode())
        if folder is not None:
            for name in EXERCISE_FILES:
                path = folder / name
                digest.update(name.encode() + b"\0" + _contents(path) + b"\0")
            students.append(Student(entry.name, folder, digest.hexdigest()))
            continue
        notebooks = sorted(entry.rglob("*.ipynb"))
        for path in notebooks:
            digest.update(_contents(path))
        problem = ("notebook submissions are not supported by grade-all yet; hand in the exercise files"
                   if notebooks else "no exercise files found (" + ", ".join(EXERCISE_FILES) + ")")
        students.append(Student(entry.name, None, digest.hexdigest(), problem))
    return students


# --------------------------------------------------------------------------- records


_write_atomic = write_atomic


def record_from_report(student: str, fingerprint: str, report) -> dict:
    from ..formats import to_gradescope

    return {"version": RECORD_VERSION, "student": student, "fingerprint": fingerprint, "status": "graded",
            "score": round(report.score, 4), "max_score": report.max_score,
            "components": {c.id: round(c.score, 4) for c in report.components},
            "duration_s": round(report.duration_s, 3), "error": "",
            "results": to_gradescope(report), "report": report.to_dict()}


def error_record(student: str, fingerprint: str, message: str) -> dict:
    from ...course import load_course

    course = load_course()
    return {"version": RECORD_VERSION, "student": student, "fingerprint": fingerprint, "status": "error",
            "score": 0.0, "max_score": course.total_points, "components": {c.id: 0.0 for c in course.components},
            "duration_s": 0.0, "error": message,
            "results": {"score": 0, "output": f"not graded: {message}", "tests": []}}


def read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == RECORD_VERSION else None


def record_status(record: dict) -> str:
    """The gradebook's status of a record: graded, not started (every component), no exercise files, or error: why."""
    if record.get("status") == "error":
        error = (str(record.get("error", "")).strip().splitlines() or ["unknown"])[0][:120]
        return "no exercise files" if error.startswith("no exercise files") else f"error: {error}"
    components = (record.get("report") or {}).get("components") or []
    if components and all(c.get("status") == "not started" for c in components):
        return "not started"
    return "graded"


def write_gradebook(out: Path, students: list[str] | None = None, known: dict[str, dict] | None = None) -> Path:
    """gradebook.csv from the per-student files (every student with a results file, or those named);
    `known` records (by student) are used instead of reading their files again.

    Columns: student, total, status (see `record_status`: zeros from untouched stubs and zeros from
    a folder without exercise files read differently), then the points of each component."""
    from ...course import load_course

    components = [c.id for c in load_course().components]
    results = out / "results"
    names = students if students is not None else sorted(p.stem for p in results.glob("*.json"))
    known = known or {}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "total", "status", *components])
    for name in names:
        record = known.get(name) or read_record(results / f"{name}.json")
        if record is None:
            continue
        status = record.get("gradebook_status") or record_status(record)
        writer.writerow([name, f"{record['score']:g}", status,
                         *(f"{record['components'].get(c, 0.0):g}" for c in components)])
    path = out / "gradebook.csv"
    _write_atomic(path, buffer.getvalue())
    return path


# --------------------------------------------------------------------------- job processes


def _core_for(index: int) -> int | None:
    """The index-th (cyclically) of the cores this process may use; None where there is only one."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    return cores[index % len(cores)] if len(cores) > 1 else None


def serve() -> None:
    """A job process: grade one student per request line on stdin, answer one line each.

    The students are graded in one pytest session (grader/engine/session.py). A
    request may ask for two grading processes instead (the first student of a
    batch, while the other jobs wait for its results). After its first student
    the job stays on one core with its workers (`DRILLS_BATCH_CORE`): a job
    and its workers hand requests back and forth thousands of times per
    student, and on one core each hand-over is a local wake-up instead of an
    interrupt to another CPU, which is costly on virtual machines (a tenth of
    a batch here).
    """
    from ...sandbox.zygote import ZYGOTE

    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else prints goes to the log, never into the replies
    sys.stdout = sys.stderr
    ZYGOTE.start()  # before the checks are collected: workers must not inherit their helpers (correct answers)
    server = _Server(replies)
    tasks = server.tasks()
    first = next(tasks, None)
    if first is not None and int(first.get("processes", 1)) > 1:
        server.grade(first)
        first = None
    pending = itertools.chain([first] if first else [], tasks)
    from ...engine.session import serve_in_session

    try:
        serve_in_session(pending, server.grade, server.limits)
    except Exception as exc:  # noqa: BLE001 - the session broke: grade the others without one
        print(f"grade-all: {exc}; going on without a shared session", file=sys.stderr)
        for task in pending:
            server.grade(task)
    replies.close()
    sys.stderr.flush()
    os._exit(0)  # every result is written: skip tearing torch down (half a second)


class _Server:
    """A job's state: its settings from the environment, and how many students it graded."""

    def __init__(self, replies) -> None:
        from ...engine.cache import ResultCache
        from ...engine.runner import limits_for

        self.replies = replies
        self.core = _core_for(int(os.environ["DRILLS_BATCH_CORE"])) if os.environ.get("DRILLS_BATCH_CORE") else None
        self.timeout = float(os.environ["DRILLS_BATCH_TIMEOUT"]) if os.environ.get("DRILLS_BATCH_TIMEOUT") else None
        self.cache = ResultCache(os.environ["DRILLS_BATCH_CACHE"]) if os.environ.get("DRILLS_BATCH_CACHE") else None
        self.limits = limits_for(timeout=self.timeout)
        self.graded = 0

    def tasks(self):
        """The requests, one per line of stdin, as dicts."""
        from ...sandbox.zygote import ZYGOTE

        warmed = False
        while True:
            if not warmed and ((not self.graded and not select.select([sys.stdin], [], [], 0)[0])
                               or ZYGOTE.meta_loaded):
                # Once per job, so that students whose masks compute on the meta device do not pay for
                # torch's set-up of it (see warm_up) each: while waiting for the first student, or as soon
                # as a student needed it (a warm-up with work waiting would hold up the next student).
                ZYGOTE.warm()
                warmed = True
            line = sys.stdin.readline()
            if not line:
                return
            yield json.loads(line)

    def grade(self, task: dict, session=None) -> None:
        """Grade one student (in `session` when given), write the results and answer; never raises."""
        from ...engine.runner import PROCESSES, run_checks
        from ...sandbox.zygote import ZYGOTE

        try:
            report = run_checks(task["folder"], timeout=self.timeout, cache=self.cache, session=session,
                                processes=min(int(task.get("processes", 1)), PROCESSES))
            record = record_from_report(task["student"], task["fingerprint"], report)
        except Exception as exc:  # the grader failed on this submission: record it, go on
            record = error_record(task["student"], task["fingerprint"], f"the grader failed: {type(exc).__name__}: {exc}")
        _write_atomic(Path(task["out"]), json.dumps(record, indent=1))
        self.replies.write(json.dumps({"student": task["student"], "status": record["status"]}) + "\n")
        self.graded += 1
        if self.core is not None and self.graded == 1:
            ZYGOTE.pin_to_core(self.core)


class Job:
    """One long-lived grading process; restarted after a crash or a hang."""

    def __init__(self, index: int, command: list[str], log: Path, env: dict) -> None:
        self.index, self.command, self.log, self.env = index, command, log, env
        self.proc: subprocess.Popen | None = None

    def start(self) -> subprocess.Popen:
        """Start the process unless it runs (it then loads torch while waiting for work)."""
        if self.proc is None or self.proc.poll() is not None:
            log = open(self.log, "a")
            env = {**self.env, "DRILLS_BATCH_CORE": str(self.index)}
            self.proc = subprocess.Popen(self.command, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=log, text=True, start_new_session=True)
            log.close()
        return self.proc

    def grade(self, task: dict, limit_s: float) -> str | None:
        """Send one student; None when it was graded, else why the job failed on it."""
        proc = self.start()
        try:
            proc.stdin.write(json.dumps(task) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return "the grading process died before it could take this submission"
        deadline = time.monotonic() + limit_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return f"grading took longer than {limit_s:g} s; the grading process was stopped"
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if ready:
                line = proc.stdout.readline()
                if line:
                    return None
                code = proc.wait()
                self.kill()
                return f"the grader's process crashed while grading this submission (exit status {code})"

    def kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except (OSError, BrokenPipeError):
                pass
        self.proc = None

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired, BrokenPipeError):
                pass
        self.kill()


class _Schedule:
    """Which student a job grades next: none whose code for a component another job is grading now.

    Students who hand in the same code for a component (the same correct
    solution, untouched stubs) would otherwise have it graded by several jobs
    at once; one after the other, the later ones take the results from the
    result cache. Without the cache (`keys` None) any student will do.
    """

    def __init__(self, students: list[Student], keys: Callable[[Student], frozenset[str]] | None) -> None:
        self.todo, self.keys = list(students), keys
        self.busy: set[str] = set()  # component keys being graded now (each by one student: see _free)
        self.held: dict[str, frozenset[str]] = {}  # student -> the keys it holds in `busy`
        self.graded: set[str] = set()  # component keys graded already: their results are in the cache
        self.changed = threading.Condition()

    def __len__(self) -> int:
        return len(self.todo)

    def take(self, stop: threading.Event) -> tuple[Student, bool] | None:
        """The next student (None when none is left), and whether it is all there is to grade for now
        (no other student being graded, and none that could be)."""
        with self.changed:
            while self.todo and not stop.is_set():
                student = next((s for s in self.todo if self._free(s)), None)
                if student is not None:
                    self.todo.remove(student)
                    alone = not self.held and not any(self._free(s) for s in self.todo)
                    self.held[student.name] = self.keys(student) - self.graded if self.keys else frozenset()
                    self.busy |= self.held[student.name]
                    return student, alone
                self.changed.wait(0.5)
            return None

    def done(self, student: Student) -> None:
        with self.changed:
            held = self.held.pop(student.name)
            self.busy -= held
            self.graded |= held
            self.changed.notify_all()

    def _free(self, student: Student) -> bool:
        return self.keys is None or self.busy.isdisjoint(self.keys(student) - self.graded)


def _component_keys(student: Student) -> frozenset[str]:
    """One key per component of the student's code (grader/engine/cache.py's, which equal keys share results);
    none when the code cannot be read that way (the student is then scheduled as if unlike any other)."""
    from ...engine.cache import component_key
    from ...contract import COMPONENTS

    try:
        return frozenset(component_key(student.folder, c, ROOT / "tests", "") for c in COMPONENTS)
    except Exception:  # noqa: BLE001 - whatever a submission's files do to the parser, the batch goes on
        return frozenset()


class _Progress:
    """A rich progress bar on a terminal, plain lines otherwise."""

    def __init__(self, total: int, done: int) -> None:
        self.total, self.done = total, done
        self.bar = None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("grading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                TextColumn("{task.description}"), console=Console(file=sys.stderr))
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
    students = discover(submissions, _grader_fingerprint())
    by_fingerprint: dict[str, dict] = {}
    todo: list[Student] = []
    skipped = 0
    for student in students:
        record = None if force else read_record(out / "results" / f"{student.name}.json")
        if record is not None and record.get("fingerprint") == student.fingerprint:
            skipped += 1
            if record["status"] == "graded":
                by_fingerprint.setdefault(student.fingerprint, record)
            continue
        todo.append(student)
    progress = _Progress(len(students), skipped)
    errors: list[str] = []
    graded = copied = 0
    lock = threading.Lock()

    known: dict[str, dict] = {}  # what finished in this run, for the gradebook

    def finish(student: Student, record: dict, copy: bool = False, written: bool = False) -> None:
        nonlocal graded, copied
        if not written:
            _write_atomic(out / "results" / f"{student.name}.json", json.dumps(record, indent=1))
        with lock:
            known[student.name] = {"score": record["score"], "components": record["components"],
                                   "gradebook_status": record_status(record)}
            if record["status"] == "error":
                errors.append(student.name)
            elif copy:
                copied += 1
            else:
                graded += 1
            progress.advance(f"{student.name}: {record['score']:g}/{record['max_score']:g}"
                             + (f" (error: {record['error'][:60]})" if record["status"] == "error" else ""))

    def copy_of(student: Student, record: dict) -> None:
        finish(student, {**record, "student": student.name}, copy=True)

    # Students that need a job: unique submissions only; the duplicates reuse their results.
    unique: dict[str, Student] = {}
    waiting: dict[str, list[Student]] = {}
    for student in todo:
        if student.folder is None:
            finish(student, error_record(student.name, student.fingerprint, student.problem))
        elif dedupe and student.fingerprint in by_fingerprint:
            copy_of(student, by_fingerprint[student.fingerprint])
        elif dedupe and student.fingerprint in unique:
            waiting.setdefault(student.fingerprint, []).append(student)
        else:
            unique[student.fingerprint] = student
    keys: dict[str, frozenset[str]] = {}
    schedule = _Schedule(list(unique.values()),
                         (lambda s: keys.get(s.name) or keys.setdefault(s.name, _component_keys(s))) if cache else None)

    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    if check_timeout:
        env["DRILLS_BATCH_TIMEOUT"] = str(check_timeout)
    if cache:  # components whose files match ones graded before reuse those results (grader/engine/cache.py)
        env["DRILLS_BATCH_CACHE"] = str(out / "cache")
    command = job_command or [sys.executable, "-m", "grader.channels.batch.command", "--serve"]
    pool = [Job(i, command, out / "logs" / f"job-{i}.log", env) for i in range(max(1, min(jobs, len(schedule) or 1)))]
    stop = threading.Event()

    crashed: list[BaseException] = []

    def run(job: Job) -> None:
        try:
            grade_with(job)
        except BaseException as exc:
            if not stop.is_set():  # a bug here: stop the batch, and say so (after the gradebook is written)
                crashed.append(exc)  # (once stopping, the job it waited on may be killed under it: no news)
                stop.set()

    def grade_with(job: Job) -> None:
        job.start()  # torch loads meanwhile
        while (taken := schedule.take(stop)) is not None:
            student, alone = taken
            path = out / "results" / f"{student.name}.json"
            task = {"student": student.name, "folder": str(student.folder), "fingerprint": student.fingerprint,
                    "out": str(path)}
            if alone:  # the other jobs can only wait for this one (the first of a class, say): lend it their cores
                task["processes"] = len(pool)
            failure = job.grade(task, student_timeout)
            schedule.done(student)
            if stop.is_set():
                return
            record = read_record(path) if failure is None else None
            written = record is not None and record.get("fingerprint") == student.fingerprint  # by the job
            if not written:
                record = error_record(student.name, student.fingerprint, failure or "the grader wrote no results")
            finish(student, record, written=written)
            for twin in waiting.pop(student.fingerprint, []):
                copy_of(twin, record)

    threads = [threading.Thread(target=run, args=(job,), daemon=True) for job in pool]
    interrupted = False
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    except KeyboardInterrupt:
        interrupted = True
        stop.set()
    finally:
        for job in pool:
            job.kill() if interrupted else job.close()
        progress.stop()
        gradebook = write_gradebook(out, [s.name for s in students], known)
    if crashed:
        raise crashed[0]
    return {"students": len(students), "graded": graded, "copied": copied, "skipped": skipped,
            "errors": errors, "interrupted": interrupted, "gradebook": str(gradebook),
            "seconds": time.perf_counter() - started}


def _grade_all(args: argparse.Namespace) -> int:
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
        print("not graded (see results/<student>.json): " + ", ".join(summary["errors"]))
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
    parser.set_defaults(func=_grade_all)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        raise SystemExit("usage: python -m grader.channels.batch.command --serve (a job process of grade-all)")
