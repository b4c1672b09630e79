"""Budgets: what a worker and everything it starts may use together, and how long student code may run.

A check's requests each have a deadline (`Limits.timeout_s`); besides it:

- memory and processes for a worker's whole tree. Where the grader may write cgroups (as root, cgroup v1's
  `memory` and `pids` hierarchies, or v2 with both controllers), each worker joins a cgroup of its own before it
  is confined (`enter`): `memory.max` (v1: `memory.limit_in_bytes`) and `pids.max` bound it and all its children
  together. Elsewhere (an ordinary user) the weaker fallback: `RLIMIT_NPROC` counted inside the worker's own user
  namespace (`namespaces`, the worker's tree only) or its own user id (as root), and the per-process
  `RLIMIT_AS` that every worker has, so a tree may hold `PIDS` times a worker's memory (`describe` says which).
- a component's student time: its checks together may wait `component_s` seconds for student code; past it
  every later request of that component fails at once as a timeout (grader/engine/checks.py).
- a submission's: past `submission_deadline` (a `time.monotonic()` time, the same in every process of the run)
  no more student code runs for it; the cases left fail as timeouts and the grade completes.
- the grader's own memory: `bound_grader` caps its address space while it grades (the soft limit; workers set
  their own).
"""
from __future__ import annotations

import errno
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Iterator

try:
    import resource
except ImportError:  # Windows: no rlimits (deadlines still hold: the handle kills a worker past them)
    resource = None  # type: ignore[assignment]

PIDS = 256  # processes and threads of a worker's tree (torch's own threads included; worker.py's RLIMIT_NPROC)
SLACK_MB = 256  # what a worker writes of its own (torch's pages it touches) on top of what student code may add
GRADER_MB = 4096  # address space the grader may add to what it maps once torch is imported
COMPONENT_CHECKS = 6  # a component's student time: this many checks' worth (course.yml `component_timeout`)
SUBMISSION_COMPONENTS = 10  # a submission's: this many components' worth (course.yml `submission_timeout`)
CGROUP_ROOT = "/sys/fs/cgroup"


@dataclass(frozen=True)
class Budget:
    memory_bytes: int  # the worker's tree together (cgroups), 0: none
    pids: int
    component_s: float  # seconds of student time per component, all its checks together
    submission_deadline: float  # time.monotonic() past which no student code of this submission runs
    cgroups: tuple[str, ...] = ()  # the folders (one per controller) where each worker makes its own cgroup


def for_grading(memory_mb: int, component_s: float, submission_s: float) -> Budget:
    return Budget((memory_mb + SLACK_MB) << 20 if memory_mb else 0, PIDS, component_s,
                  time.monotonic() + submission_s, _base())


def describe(budget: Budget | None) -> str:
    if budget is not None and budget.cgroups:
        return (f"cgroups: each worker's whole tree at most {budget.memory_bytes >> 20} MB and {budget.pids} "
                f"processes")
    return (f"no cgroups here: at most {PIDS} processes per worker's tree where it runs in a user namespace or "
            f"as a user of its own, memory per process only")


# --------------------------------------------------------------------------- cgroups (grader side)

def _own_cgroups() -> dict[str, str]:
    """controller (or "" for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    own = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for controller in controllers.split(",") if controllers else [""]:
                    own[controller] = path
    except (OSError, ValueError):
        pass
    return own


@lru_cache(maxsize=1)
def _base() -> tuple[str, ...]:
    """This grading process's own cgroup folders, made once (empty where cgroups cannot be written)."""
    if os.environ.get("DRILLS_CGROUPS") == "off":  # tests: as on a machine without them
        return ()
    own, name = _own_cgroups(), f"drills-{os.getpid()}"
    made: list[str] = []
    try:
        if all(os.path.isdir(f"{CGROUP_ROOT}/{c}") for c in ("memory", "pids")) and "memory" in own and "pids" in own:
            for controller in ("memory", "pids"):  # v1
                folder = f"{CGROUP_ROOT}/{controller}{own[controller].rstrip('/')}/{name}"
                os.mkdir(folder, 0o755)
                made.append(folder)
        elif os.path.exists(f"{CGROUP_ROOT}/cgroup.controllers") and "" in own:  # v2 (untested here)
            parent = f"{CGROUP_ROOT}{own[''].rstrip('/')}"
            folder = f"{parent}/{name}"
            os.mkdir(folder, 0o755)
            made.append(folder)
            with open(f"{folder}/cgroup.subtree_control", "w") as f:
                f.write("+memory +pids")
        else:
            return ()
        _probe(tuple(made))
    except OSError:
        for folder in reversed(made):
            _remove(folder)
        return ()
    import atexit

    atexit.register(release)
    return tuple(made)


def _probe(base: tuple[str, ...]) -> None:
    """A child cgroup can be made and limited in each (raises OSError where not)."""
    for folder in base:
        probe = f"{folder}/probe"
        os.mkdir(probe)
        try:
            _limit(probe, 1 << 30, PIDS)
        finally:
            os.rmdir(probe)


def _limit(folder: str, memory_bytes: int, pids: int) -> None:
    for name, value in (("memory.limit_in_bytes", memory_bytes), ("memory.max", memory_bytes), ("pids.max", pids)):
        if os.path.exists(f"{folder}/{name}") and value:
            with open(f"{folder}/{name}", "w") as f:
                f.write(str(value))


def release() -> None:
    """Remove this process's cgroups (their workers have ended; a worker's own is removed as it is reaped)."""
    if not _base.cache_info().currsize:
        return
    for folder in _base():
        for entry in os.listdir(folder) if os.path.isdir(folder) else ():
            if os.path.isdir(f"{folder}/{entry}"):
                _remove(f"{folder}/{entry}")
        _remove(folder)


def _remove(folder: str, wait_s: float = 1.0) -> None:
    """rmdir a cgroup, waiting a little while its last process is still being torn down."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.rmdir(folder)
            return
        except FileNotFoundError:
            return
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                return
            time.sleep(0.01)


def forget(budget: Budget | None, pid: int) -> None:
    """The zygote, once it has reaped worker `pid`: remove its cgroup."""
    if budget is not None:
        for folder in budget.cgroups:
            _remove(f"{folder}/w{pid}", wait_s=0.2)


# --------------------------------------------------------------------------- the worker's side

def enter(budget: Budget | None, pid: int) -> None:
    """In a freshly forked worker, before it is confined: join a cgroup of its own, limited (raises OSError where
    it cannot: the worker then never runs student code)."""
    if budget is None:
        return
    for folder in budget.cgroups:
        own = f"{folder}/w{pid}"
        try:
            os.mkdir(own, 0o755)
        except FileExistsError:
            pass
        _limit(own, budget.memory_bytes, budget.pids)
        with open(f"{own}/cgroup.procs", "w") as f:
            f.write("0")


def limit_processes(budget: Budget | None) -> None:
    """The fallback without cgroups, once confined where the count is the tree's own (a user namespace of its
    own, or a user id of its own): at most `pids` processes and threads."""
    if budget is not None and not budget.cgroups and resource is not None:
        resource.setrlimit(resource.RLIMIT_NPROC, (budget.pids, budget.pids))


@contextmanager
def bound_grader(megabytes: int = GRADER_MB) -> Iterator[None]:
    """While grading, cap this process's address space at what it maps now plus `megabytes` (the soft limit
    only: workers forked from it set their own, lower, limits). The caller's own limit comes back after: the
    grading process may be a learner's notebook kernel, or a test run that starts a browser next."""
    if resource is None:
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    try:
        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError):
        mapped = None
    cap = None if mapped is None else mapped + (megabytes << 20)
    if cap is not None and hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if cap is None or (soft != resource.RLIM_INFINITY and soft <= cap):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
