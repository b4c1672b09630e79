"""Run a function in a forked copy of the grader, so that a second core grades too."""
from __future__ import annotations

import os
import pickle
from typing import Any, Callable

from ..errors import GraderError


class Forked:
    """A fork of this process that runs `fn(receive)`, where `receive()` waits for the next `send(value)`;
    `result()` returns what `fn` gave. `then()`, if given, runs in the fork after its result has gone.

    Fork early, while this process has no threads yet, and send the work once it
    is known (and what is learnt later, in further sends). Only the grader's own
    code runs in the fork (student code stays in workers), so what travels both
    ways is trusted and goes as a pickle. The result does not wait for the fork's
    end (`then`, and its own exit): whoever forked it ends and reaps it, with all
    it started (grader/sandbox/reaper.py).
    """

    def __init__(self, fn: Callable[[Callable[[], Any]], Any], then: Callable[[], None] | None = None) -> None:
        inbox_read, inbox_write = os.pipe()
        self._outbox, outbox_write = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(inbox_write)
            os.close(self._outbox)
            try:
                with os.fdopen(inbox_read, "rb") as inbox:
                    payload = {"ok": fn(lambda: pickle.load(inbox))}
            except BaseException as exc:  # noqa: BLE001 - reported to the parent, whatever it was
                payload = {"error": f"{type(exc).__name__}: {exc}"}
            try:
                with os.fdopen(outbox_write, "wb") as outbox:
                    pickle.dump(payload, outbox)
                if then is not None:
                    then()
            finally:
                os._exit(0)
        os.close(inbox_read)
        os.close(outbox_write)
        self._inbox = os.fdopen(inbox_write, "wb")

    def send(self, value: Any) -> None:
        self._inbox.write(pickle.dumps(value))
        self._inbox.flush()

    def result(self) -> Any:
        self._inbox.close()
        # One pickle, read to its end rather than to the pipe's: what the fork started (its zygote) holds the
        # pipe open until `then` ends it.
        with os.fdopen(self._outbox, "rb") as outbox:
            try:
                payload = pickle.load(outbox)
            except (EOFError, pickle.UnpicklingError):
                payload = None
        try:
            os.waitpid(self.pid, os.WNOHANG)  # (ended already: reaped here)
        except ChildProcessError:
            pass
        if not isinstance(payload, dict):
            raise GraderError("a grading process ended without reporting its checks")
        if "error" in payload:
            raise GraderError(f"a grading process failed: {payload['error']}")
        return payload["ok"]
