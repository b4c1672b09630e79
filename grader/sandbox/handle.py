"""The grader's side of the boundary: a handle on one worker process, and the executor that speaks through it.

`Worker` asks the zygote for a process (or starts one without fork: spawner.py), sends it requests (wire.py) and waits
for each answer only until the check's deadline; a hang, a crash, `os._exit`
or running out of memory ends in WorkerTimeout or WorkerDied, and the next
request starts a fresh worker. Student code runs in the worker and can write
to its end of the pipe: every reply is taken as untrusted data, decoded within
bounds (wire.py) and checked against the request it answers, its texts cut
(protocol.checked_reply); one that is not a well-formed answer to that request
ends the worker like a crash. `RemoteExecutor` turns those, and the errors
the worker reports, into the protocol's errors that fail the check at hand.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from multiprocessing.connection import Connection
from typing import Any

from ..text import Phrase
from . import spawner, wire
from .confine import SANDBOX_FAILED, Plan
from .protocol import (ERROR_CLASSES, READY, CrossedOver, Limits, StudentCrash, StudentError, StudentTimeout,
                       call_label, checked_reply)
from .zygote import ZYGOTE

REPLY_LIMIT = 256 * 1024 * 1024  # no honest answer comes near this


class WorkerTimeout(Exception):
    """The worker did not answer before the check's deadline (it was killed)."""


class WorkerDied(Exception):
    """The worker process ended while running a request."""


class Worker:
    """One worker process for one implementation folder and one component's isolation."""

    def __init__(self, plan: Plan, isolate_for: str | None, limits: Limits, broken: dict[str, str] | None = None,
                 preload: tuple[str, ...] = (), trusted: tuple[str, ...] = (), mates: frozenset[str] = frozenset(),
                 crossed: set[str] | None = None, pieces: frozenset[str] | None = None) -> None:
        self.plan, self.isolate_for, self.limits, self.trusted = plan, isolate_for, limits, tuple(trusted)
        self.pieces = pieces  # the stand-in pieces it holds (grader/engine/reach.py); None: all it may
        # the components it serves, `isolate_for` being the one whose checks run now (see `switch`)
        self.mates = frozenset(mates)
        self.crossed = set() if crossed is None else crossed  # components whose code reached a mate's names
        self.broken = dict(broken or {})
        self.preload = tuple(preload)
        self.timed_out: set[str] = set()  # calls that hung once: later ones fail at once
        self.output = bytearray()
        self.output_dropped = 0
        self.pid: int | None = None
        self._conn: Connection | None = None
        self._ahead: list[str | None] = []  # requests sent without waiting: the label whose error counts, or None
        self._sent: list[tuple[int, str]] = []  # (id, op) of each request sent and not answered yet, oldest first
        self._ids = 0
        self.earlier_error: dict | None = None  # the reply of the first of those that failed
        self._spawning = False  # asked of the zygote, not answered yet
        self._reset_first = False  # the next request first drops the objects made so far
        self._fresh = False  # spawned and not asked anything yet
        self._process: spawner.Spawned | None = None  # a worker started without fork (spawner.py)
        self._unready = False  # started without fork, and not said it is ready yet
        self._provide = False  # started for another handle (`retire`): the next request first says who it is
        self.starting_s = 0.0  # of the last request's wait, what went to the worker's own start (no student time)

    def spawn(self) -> None:
        """Have the zygote fork this worker, without waiting (it imports `preload` meanwhile)."""
        if self.pid is not None or self._spawning:
            return
        request = {"plan": self.plan, "isolate_for": self.isolate_for, "limits": self.limits, "broken": self.broken,
                   "preload": self.preload, "trusted": self.trusted, "mates": self.mates, "pieces": self.pieces}
        if spawner.spawning():  # one put back by a handle done with it (`retire`) is told who it is first
            self._process = spawner.take_spare((self.plan, self.limits))
            self._provide = self._process is not None
            if self._process is None:
                self._process = spawner.Spawned(request, REPLY_LIMIT)
            self._attach({"pid": self._process.pid}, [])
            return
        ZYGOTE.ask({"cmd": "spawn", **request}, self._attach)
        self._spawning = True

    def _start(self) -> None:
        self.spawn()
        ZYGOTE.take_answers(until=lambda: not self._spawning)

    def _attach(self, message: dict, fds: list[int]) -> None:
        self._spawning = False
        self.pid = message["pid"]
        self._ahead, self._sent = [], []
        self._reset_first = False
        self._fresh = bool(self.preload)  # its first answer may wait for what it imports first
        if self._process is not None:  # started without fork: its pipes, and its word that it is ready to come
            self._conn, self._unready = self._process, not self._process.ready
            if not self._process.drained:  # (a process kept for another handle is drained already)
                self._process.drained = threading.Thread(target=self._drain, args=(self._process.output_fd,),
                                                         daemon=True)
                self._process.drained.start()
            return
        self._conn = Connection(fds[0])
        threading.Thread(target=self._drain, args=(fds[1],), daemon=True).start()

    def _drain(self, fd: int) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            room = max(self.limits.output_bytes - len(self.output), 0)
            self.output += chunk[:room]
            self.output_dropped += len(chunk) - len(chunk[:room])
        os.close(fd)

    def switch(self, component: str, preload: tuple[str, ...], trusted: tuple[str, ...] | None = None,
               mates: frozenset[str] | None = None, pieces: frozenset[str] | None = None) -> None:
        """Serve another of the mates' checks from now on: the worker drops what the last one's code made and
        imports the files afresh; where it cannot be made as it was, or a request has not begun it yet, a fresh
        worker starts for them instead. Given `trusted`, `mates` and `pieces` too, a worker started without fork
        serves any component so (it reads those stand-ins afresh: spawner.py); a forked one is replaced."""
        identity = None if trusted is None else (tuple(trusted), frozenset(mates or ()), pieces)
        if identity == (self.trusted, self.mates, self.pieces):
            identity = None
        if component == self.isolate_for and identity is None and not self._provide:
            return
        previous, previous_mates = self.isolate_for, self.mates
        self.isolate_for, self.preload = component, tuple(preload)
        if identity is not None:
            self.trusted, self.mates, self.pieces = identity
        self.timed_out.clear()  # a name that hung for the last one may be a stand-in for this one
        if self.pid is None and not self._spawning:
            return  # the next request starts it as `component`
        reply = self._switch(full=identity is not None)
        if reply.get("crossed") and previous in previous_mates:  # (a flag the worker sets: see `crossed_over`)
            self.crossed.add(previous)
        if not reply.get("ok"):
            self.kill(how_it_ended=False)
        self.earlier_error = None

    def _switch(self, full: bool) -> dict:
        """The worker's answer to a switch to this handle's component; `full`: with the stand-ins, mates, trusted
        names and broken files this handle says, which only a worker started without fork takes."""
        request: dict[str, Any] = {"op": "switch", "component": self.isolate_for, "preload": self.preload}
        if full or self._provide:
            if self._process is None:
                return {}  # (a forked worker's stand-ins are read once, before it is confined)
            self._provide = False
            request.update(trusted=list(self.trusted), mates=sorted(self.mates), broken=self.broken,
                           pieces=None if self.pieces is None else sorted(self.pieces))
        try:
            return self.request(request, time.monotonic() + self.limits.startup_s)
        except (WorkerTimeout, WorkerDied):
            return {}

    def retire(self) -> None:
        """Done with this worker: one started without fork is put back as it was before any student code ran and
        kept for the next handle of the same grading (spawner.park: an import of torch fewer); else it ends."""
        if self._process is not None and self.pid is not None:
            self.isolate_for, self.preload, self.trusted = None, (), ()
            self.mates, self.pieces = frozenset(), frozenset()
            if self._switch(full=True).get("ok") and not self._ahead and self._process is not None:
                process, self._process, self._conn, self.pid = self._process, None, None, None
                spawner.park(process, (self.plan, self.limits))
                return
        self.kill(how_it_ended=False)

    def send_ahead(self, message: dict, label: str | None = None) -> None:
        """Send a request without waiting for its answer; with a `label`, an error in it becomes
        `earlier_error` when the next request is answered."""
        if self.pid is None:
            self._start()
        assert self._conn is not None
        try:
            self._conn.send_bytes(self._encode(message))
            self._ahead.append(label)
        except OSError:
            self.kill()

    def reset_later(self) -> None:
        """Have the objects made so far dropped before the next request (with it: one message fewer)."""
        self._reset_first = True

    def _encode(self, message: dict) -> bytes:
        if self._reset_first:
            message, self._reset_first = {**message, "reset": True}, False
        self._ids += 1
        self._sent.append((self._ids, message["op"]))
        return wire.dumps({**message, "id": self._ids})

    def crossed_over(self) -> bool:
        """Whether a reply that says the code reached a worker-mate's name may be true: only in a worker that has
        mates, and once per component (the second time it is graded, alone, nothing can cross)."""
        return bool(self.mates) and self.isolate_for in self.mates

    def forget_ahead(self) -> None:
        """Errors of the requests sent ahead so far no longer count."""
        self._ahead = [None] * len(self._ahead)
        self.earlier_error = None

    @property
    def first_ahead(self) -> str | None:
        """The label of the first request sent ahead and not answered yet."""
        return next((label for label in self._ahead if label), None)

    def request(self, message: dict, deadline: float) -> Any:
        """Send one request; returns the decoded reply or raises WorkerTimeout / WorkerDied."""
        if self.pid is None:
            self._start()
        if self._provide and message["op"] != "switch":
            if not self._switch(full=True).get("ok"):
                self.kill(how_it_ended=False)
                self._start()
        assert self._conn is not None
        if self._fresh:
            deadline, self._fresh = deadline + self.limits.startup_s, False
        self.starting_s = 0.0
        try:
            self._conn.send_bytes(self._encode(message))
            if self._unready:  # its interpreter's start (torch's import) is no check's time
                self.starting_s = self._until_ready()
                deadline += self.starting_s
            while self._ahead:  # the answers to requests sent ahead come first
                earlier = self._decode(self._receive(deadline))  # each checked, whether it counts or not
                if self._ahead.pop(0) is not None and self.earlier_error is None:
                    if "error" in earlier:
                        self.earlier_error = earlier
            data = self._receive(deadline)
        except (EOFError, OSError) as exc:
            code = self.kill(grace=0.5)  # it is ending: let it, so that its status says how
            raise WorkerDied(_describe_exit(code)) from exc
        return self._decode(data)

    def _until_ready(self) -> float:
        """Wait for a worker started without fork to say it is ready (spawner.STARTUP_S at most); seconds it took."""
        started = time.monotonic()
        process = self._process
        try:
            ready = self._conn.poll(spawner.STARTUP_S) and wire.loads(self._conn.recv_bytes(REPLY_LIMIT)) == READY
        except (EOFError, OSError, wire.WireError):
            ready = False
        if not ready:  # before any student code ran: the interpreter or the grader's own imports failed
            code = self.kill(grace=0.5)
            if process is not None and process.drained:
                process.drained.join(1.0)
            last = bytes(self.output).decode(errors="replace").strip().splitlines()[-1:] or [_describe_exit(code)]
            raise WorkerDied(f"the grader could not start a worker process (a grader error, not yours): {last[0]}")
        self._unready, self._process.ready = False, True
        return time.monotonic() - started

    def _receive(self, deadline: float) -> bytes:
        assert self._conn is not None
        if not self._conn.poll(max(deadline - time.monotonic(), 0.0)):
            self.kill()
            raise WorkerTimeout()
        return self._conn.recv_bytes(REPLY_LIMIT)

    def _decode(self, data: bytes) -> dict:
        """The reply to the oldest request not answered yet, checked against it (protocol.checked_reply)."""
        request_id, op = self._sent.pop(0) if self._sent else (-1, "")
        try:
            reply = checked_reply(wire.loads(data), op, request_id)
        except wire.WireError as exc:
            self.kill()
            raise WorkerDied(f"sent something that is not data ({exc})") from None
        if reply.pop("meta_loaded", False):
            ZYGOTE.meta_loaded = True
        return reply

    def kill(self, how_it_ended: bool = True, grace: float = 0.0) -> int | None:
        """End the worker and everything it started; returns how it ended (see os.waitstatus_to_exitcode),
        unless told that nobody asks (then the zygote reaps it without answering)."""
        if self._spawning:
            self._start()
        pid, self.pid = self.pid, None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._process is not None:  # started without fork: this process ends it and knows how it ended
            process, self._process = self._process, None
            code = process.end(grace)
            return code if how_it_ended else None
        if pid is None:
            return None
        if not grace:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if not ZYGOTE.running:  # stopped, and its workers with it
            return None
        if not how_it_ended:
            try:
                ZYGOTE.tell({"cmd": "reap", "pid": pid, "answer": False})
            except OSError:
                pass
            return None
        answer: dict = {}
        try:
            ZYGOTE.ask({"cmd": "reap", "pid": pid, "grace": grace}, lambda message, fds: answer.update(message))
            ZYGOTE.take_answers(until=lambda: bool(answer))
        except (OSError, EOFError, IndexError):  # the zygote is gone, and its workers with it
            return None
        return None if answer["status"] is None else os.waitstatus_to_exitcode(answer["status"])


def _describe_exit(code: int | None) -> str:
    if code is None:
        return Phrase("the worker process stopped answering")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        if name == "SIGSEGV":
            return Phrase("the process crashed with {signal} (a segmentation fault)", signal=name)
        if name == "SIGKILL":
            return Phrase("the process crashed with {signal} (killed: out of memory?)", signal=name)
        return Phrase("the process crashed with {signal}", signal=name)
    if code == SANDBOX_FAILED:
        return Phrase("the grader could not set up the sandbox for this worker (a grader error, not yours)")
    return Phrase("the process exited with status {code} (os._exit or a crash in native code)", code=code)




class RemoteExecutor:
    """The grader's side of a worker process: same `run` as Executor, across the boundary."""

    def __init__(self, worker, timeout_s: float) -> None:
        self.worker, self.timeout_s = worker, timeout_s
        self.waited = 0.0  # seconds of this check spent waiting for the worker: the student's time, not the checks'

    def run(self, op: str, **request: Any) -> Any:
        label = self._label(op, request)
        started = time.monotonic()
        try:
            reply = self.worker.request({"op": op, **request}, started + max(self.timeout_s - self.waited, 0.0))
        except WorkerTimeout:
            self.worker.timed_out.add(label)
            raise StudentTimeout("Timeout", Phrase("timed out after {seconds} s in `{call}`",
                                                 seconds=format(self.timeout_s, "g"), call=label)) from None
        except WorkerDied as exc:
            raise StudentCrash("Crash", Phrase("{why} while running `{call}`", why=exc.args[0] if exc.args else str(exc),
                                             call=self.worker.first_ahead or label)) from None
        finally:
            self.waited += time.monotonic() - started - self.worker.starting_s
        earlier = self.worker.earlier_error is not None
        if earlier:  # a request sent ahead failed first
            reply, self.worker.earlier_error = self.worker.earlier_error, None
        if "error" in reply:
            error = reply["error"]  # (its fields checked and cut: protocol.checked_reply)
            if error["class"] == "CrossedOver" and self.worker.crossed_over():
                self.worker.crossed.add(self.worker.isolate_for)
                raise CrossedOver(error["message"])
            cls = ERROR_CLASSES.get(error.get("class"), StudentError)
            raise cls(error["type"], error["message"], error["where"], tuple(error["kinds"]), "" if earlier else label)
        return reply.get("ok")

    def run_ahead(self, op: str, **request: Any) -> None:
        """Send a request whose result is not needed without waiting; an error in it is raised by the next `run`."""
        self.worker.send_ahead({"op": op, **request}, self._label(op, request))

    def _label(self, op: str, request: dict) -> str:
        """What the request is reported as; a call that timed out in an earlier check fails at once."""
        label = call_label(op, request)
        if label in self.worker.timed_out:
            raise StudentTimeout("Timeout", Phrase("skipped: `{call}` timed out in an earlier check", call=label))
        return label

    def close(self) -> None:
        if self.worker.pid is not None:
            self.worker.forget_ahead()
            self.worker.reset_later()
