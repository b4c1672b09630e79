"""The controller's handle on one job process of grade-all (serve.py runs on the other side)."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from pathlib import Path

from ...paths import ROOT


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
