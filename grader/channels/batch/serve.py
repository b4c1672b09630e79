"""A job process of grade-all: `python -m grader.channels.batch.serve`, one student per request line.

This side of the process boundary imports the engine and writes each
student's results file itself; the controller (command.py, job.py) only
sends requests and reads one answer line per student.
"""
from __future__ import annotations

import itertools
import json
import os
import select
import sys
from pathlib import Path

from .records import dump, error_record, record_from_report
from ...files import write_atomic


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
        write_atomic(Path(task["out"]), dump(record))
        self.replies.write(json.dumps({"student": task["student"], "status": record["status"]}) + "\n")
        self.graded += 1
        if self.core is not None and self.graded == 1:
            ZYGOTE.pin_to_core(self.core)




if __name__ == "__main__":
    serve()
