"""Ending what student code leaves running: every process descended from the grader but its zygote.

The grader is the "child subreaper" of everything its workers start (zygote.py
sets it), so a process that student code forks and leaves behind comes back to
it here, to be stopped and killed.
"""
from __future__ import annotations

import os
import select
import signal
import time

from . import budget, spawner
from .zygote import ZYGOTE


def _children() -> dict[int, list[int]]:
    """pid -> its children's pids, every process's, read from /proc."""
    children: dict[int, list[int]] = {}
    if not os.path.isdir("/proc"):  # (macOS, Windows: only the workers spawner.py started are known: `shutdown`)
        return children
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants() -> list[int]:
    """Every process descended from this one or from its zygote, except the zygote itself."""
    me = os.getpid()
    children = _children()
    # the grader's other descendants, and the zygote's: workers left running, and what student code left
    found, stack = [], [p for p in children.get(me, []) if p != ZYGOTE.pid] + children.get(ZYGOTE.pid, [])
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found


def kill_strays() -> list[int]:
    """Kill every process descended from this one except the zygote; returns their pids.

    Each one found is stopped first, and the search repeated until it finds no
    new one, so that a process that forks as it is found (a new pid each time)
    cannot stay a step ahead; then all are killed and reaped.
    """
    stopped: list[int] = []
    for _ in range(200):
        new = [pid for pid in _descendants() if pid not in stopped]
        if not new:
            break
        for pid in new:
            try:
                os.kill(pid, signal.SIGSTOP)
            except (ProcessLookupError, PermissionError):
                pass
        stopped += new
    killed = []
    for pid in stopped:
        try:
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        except (ProcessLookupError, PermissionError):
            pass
    for pid in killed:
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
    return killed


def shutdown(timeout_s: float = 5.0) -> None:
    """Before the grader exits: end every process it started and wait for each (nothing is left re-parented)."""
    kill_strays()
    spawner.end_all()
    ZYGOTE.stop()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and hasattr(os, "WNOHANG"):  # (Windows: no children but those ended above)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break  # no child left
        if pid == 0:
            kill_strays()
            _until_a_child_ends(min(0.01, max(deadline - time.monotonic(), 0.0)))
    budget.release()  # the cgroups this process made (empty by now: their processes have ended)


def _until_a_child_ends(timeout_s: float) -> None:
    """Wait until one of this process's children ends, or `timeout_s`: a killed one takes a few milliseconds to
    go (its memory is torn down), often less than a poll's sleep."""
    waits = []
    for pid in _children().get(os.getpid(), []) if hasattr(os, "pidfd_open") else ():
        try:
            waits.append(os.pidfd_open(pid))
        except OSError:  # it has gone already
            continue
    try:
        if waits:
            select.select(waits, [], [], timeout_s)
        else:
            time.sleep(timeout_s)
    finally:
        for fd in waits:
            os.close(fd)
