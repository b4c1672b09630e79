"""Workers started without fork: the portable path (Windows, macOS, or `GRADER_WORKERS=spawn` anywhere).

Where `os.fork` is missing (Windows) or unsafe once torch is imported (macOS), or where asked for
(`GRADER_WORKERS=spawn`: how CI and selftests/test_portable.py cover this path on Linux), a worker is a
fresh interpreter, `python -m grader.sandbox.worker` (worker.py's `main`), started by subprocess.Popen.
It reads what a zygote would have handed it from its stdin, then speaks the same codec (wire.py) over
its stdin and stdout (`wire.Frames`); what student code prints goes to its stderr, which the handle
drains as it drains a forked worker's output pipe. It imports torch itself (a second or so), so the
handle waits for its word that it is ready apart from the checks' deadlines (`STARTUP_S`).

Deadlines are the handle's, kept by killing the process (Popen.kill: SIGKILL to its process group on
POSIX, TerminateProcess on Windows, where what the worker started outlives it); the memory limit is the
worker's RLIMIT_AS where `resource` exists and /proc says what the worker maps (Linux).
There is no sandbox: a grading through this path is "none" (confine.choose), said at the top of every
report, and refused where the grader grades others unless accepted (--accept-protection none).
"""
from __future__ import annotations

import os
import pickle
import queue
import signal
import subprocess
import sys
import threading

from . import budget, wire
from ..paths import GRADER

VARIABLE = "GRADER_WORKERS"
FORK, SPAWN = "fork", "spawn"
STARTUP_S = 120.0  # a spawned interpreter's own start (torch's import, on a loaded machine) before it is ready


def method() -> str:
    """How this process starts workers: "spawn" where asked (GRADER_WORKERS=spawn), where there is no fork
    (Windows) or on macOS (fork after torch's import is unsafe there) unless GRADER_WORKERS=fork; else "fork"."""
    wanted = os.environ.get(VARIABLE, "").strip().lower()
    if wanted == SPAWN or not hasattr(os, "fork"):
        return SPAWN
    if wanted == FORK:
        return FORK
    return SPAWN if sys.platform == "darwin" else FORK


def spawning() -> bool:
    return method() == SPAWN


LIVE: set["Spawned"] = set()  # the workers started and not ended yet (ended at exit: `end_all`)


class Spawned:
    """One spawned worker: its requests' channel (the same `send_bytes`, `poll`, `recv_bytes` and `close` as a
    multiprocessing Connection; a thread reads the replies, so that one can be waited for until a deadline on
    every platform), the descriptor its output comes out of, and its end."""

    def __init__(self, request: dict, reply_limit: int) -> None:
        requests_read, requests_write = os.pipe()
        replies_read, replies_write = os.pipe()
        output_read, output_write = os.pipe()
        env = dict(os.environ)  # (the worker scrubs it before any student code runs: confine._scrub_environment)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(GRADER.parent), env.get("PYTHONPATH")) if p)
        python = sys.executable
        base = getattr(sys, "_base_executable", python)
        if sys.platform == "win32" and os.path.normcase(base) != os.path.normcase(python):
            # a venv's python.exe on Windows only starts the base interpreter as its own child, which killing it
            # would leave running: start that one directly, told of the venv (multiprocessing does the same, bpo-35797)
            python, env["__PYVENV_LAUNCHER__"] = base, python
        try:
            self.process = subprocess.Popen([python, "-m", "grader.sandbox.worker"], stdin=requests_read,
                                            stdout=replies_write, stderr=output_write, env=env)
        except BaseException:
            for fd in (requests_write, replies_read, output_read):
                os.close(fd)
            raise
        finally:
            for fd in (requests_read, replies_write, output_write):
                os.close(fd)
        self.pid, self.output_fd, self.budget = self.process.pid, output_read, request["plan"].budget
        self.ready = False  # it has said so (the handle's `_until_ready`)
        self.drained: threading.Thread | None = None  # the handle's thread that reads its output
        self._frames = wire.Frames(replies_read, requests_write)
        self._replies: queue.Queue = queue.Queue(maxsize=2)  # read ahead no further than this
        self._pending: bytes | BaseException | None = None
        self._closed = threading.Event()
        LIVE.add(self)
        self._frames.send_bytes(pickle.dumps(request))  # the grader's own message, before any student code runs
        threading.Thread(target=self._read, args=(reply_limit,), daemon=True).start()

    def _read(self, limit: int) -> None:
        while not self._closed.is_set():
            try:
                item: bytes | BaseException = self._frames.recv_bytes(limit)
            except (EOFError, OSError) as exc:
                item = exc
            while not self._closed.is_set():
                try:
                    self._replies.put(item, timeout=0.5)
                    break
                except queue.Full:
                    continue
            if isinstance(item, BaseException):
                return

    def send_bytes(self, data: bytes) -> None:
        self._frames.send_bytes(data)

    def poll(self, timeout: float | None) -> bool:
        if self._pending is None:
            try:
                self._pending = self._replies.get(timeout=timeout)
            except queue.Empty:
                return False
        return True

    def recv_bytes(self, maxlength: int | None = None) -> bytes:  # (the reading thread holds to the limit)
        self.poll(None)
        item = self._pending
        if isinstance(item, BaseException):
            raise item  # (kept: every later read says the same)
        self._pending = None
        return item

    def close(self) -> None:
        self._closed.set()
        self._frames.close()

    def end(self, grace: float = 0.0) -> int | None:
        """End it, after `grace` seconds in which it may end on its own, with whatever it started (its process
        group, where there are groups); how it ended, as os.waitstatus_to_exitcode says it (negative: a signal)."""
        code = None
        if grace:
            try:
                code = self.process.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if hasattr(os, "killpg"):
            try:
                os.killpg(self.pid, signal.SIGKILL)  # (a session of its own: worker._lock_down)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.process.kill()
        except OSError:
            pass
        if code is None:
            code = self.process.wait()
        self.close()
        LIVE.discard(self)
        budget.forget(self.budget, self.pid)
        return code


_SPARE: list[tuple[object, Spawned]] = []  # a worker put back as it was, and the grading it may serve


def park(spawned: Spawned, grading: object) -> None:
    """Keep a worker that a handle is done with (put back as it was before any student code ran) for the next
    handle of the same `grading` (its plan and limits): the loader's becomes the checks' first worker."""
    for _, earlier in _SPARE:
        earlier.end()
    _SPARE[:] = [(grading, spawned)]


def take_spare(grading: object) -> Spawned | None:
    """The worker kept for `grading`, if any and still running."""
    if _SPARE and _SPARE[0][0] == grading and _SPARE[0][1].process.poll() is None:
        return _SPARE.pop()[1]
    return None


def end_all() -> None:
    """End every spawned worker still running, the one kept too (the end of a grading, the grader's exit)."""
    _SPARE.clear()
    for spawned in list(LIVE):
        spawned.end()
