"""The worker side of the boundary: a confined process that runs student code for the checks.

A worker is forked by the zygote (zygote.py) with torch already imported, or,
where workers are not forked (spawner.py), started as `python -m
grader.sandbox.worker` (`main`), which imports torch itself and is served over
its stdin and stdout. It reads the stand-ins it may use, locks itself down (its
own session, output into a capped pipe, resource limits where the platform has
them, then confine.py's sandbox), and answers requests (plain data, wire.py)
with an Executor until its pipe closes. It imports nothing of the grader's side
but the codec and protocol.py.
"""
from __future__ import annotations

import ctypes
import dataclasses
import gc
import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection
from typing import TYPE_CHECKING, Any

from . import confine, standins, wire
from .confine import Plan
from .protocol import (READY, Limits, NotStarted, StudentError,  # the worker cuts what crosses as the grader does
                       student_text, wire_text)

if TYPE_CHECKING:
    from .state import ProcessState

PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
# Imported by torch on the first operation on meta tensors (over a second: it and 800 more modules, sympy too).
META_MODULE = "torch._dynamo"


def prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError, TypeError):  # not Linux (Windows: no C library by that name)
        pass


def _lock_down(output_fd: int, keep_fds: tuple[int, ...], limits: Limits, plan: Plan) -> None:
    """Lock the worker down before any student code runs (grader/sandbox/confine.py does the confinement proper).
    Where `resource` is missing (Windows) there are no rlimits: the deadlines still hold (the handle kills)."""
    try:
        import resource
    except ImportError:
        resource = None
    if hasattr(os, "setsid"):
        os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    start = 3
    for fd in sorted(keep_fds):
        os.closerange(start, fd)
        start = fd + 1
    os.closerange(start, 1 << 16)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.dont_write_bytecode = True
    mapped = None
    if resource is not None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            with open("/proc/self/statm") as statm:  # before the sandbox: it may have no /proc
                mapped = int(statm.read().split()[0]) * resource.getpagesize()
        except OSError:  # no /proc (macOS): no address-space limit
            pass
    try:
        confine.confine(plan)
    except BaseException:  # noqa: BLE001 - never run student code less confined than the report says
        os._exit(confine.SANDBOX_FAILED)
    if resource is None:
        return
    if plan.protection != confine.NAMESPACES:  # there /tmp is a tmpfs of its own with a size limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (confine.SCRATCH_MB << 20, confine.SCRATCH_MB << 20))
    if os.getuid() >= confine.WORKER_UID_BASE:  # a user of its own (as root): a fork bomb stops here
        resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
    if limits.memory_mb and mapped is not None:
        cap = mapped + limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _die_with(parent_pid: int) -> None:
    """Be killed when the zygote dies (even mid-hang); it dies with the grader."""
    prctl(PR_SET_PDEATHSIG, getattr(signal, "SIGKILL", 9))
    # it died before this line (a worker born PID 1 of its own namespace sees a parent outside it as 0: the check
    # cannot tell there, and such an early orphan ends when its requests' socket closes, with the grader)
    if os.getppid() not in (parent_pid, 0):
        os._exit(1)


def serve(requests: "Connection | wire.Frames", output_fd: int, plan: Plan, isolate_for: str | None, limits: Limits,
          broken: dict[str, str], zygote_pid: int, preload: tuple[str, ...] = (), trusted: tuple[str, ...] = (),
          mates: frozenset[str] = frozenset(), pieces: frozenset[str] | None = None,
          reprovision: bool = False) -> None:
    """The worker's main loop: answer requests until the pipe closes.

    `preload` names modules to import before the first request (a failure
    there is reported again by the request that needs the module). The
    stand-ins this worker may use are read before it is confined: the files
    of the others are out of its reach from then on. A worker that `mates`
    share with `isolate_for` holds none of theirs either, and a `switch`
    request moves it on to another of them (see `_switch`). `pieces`, where
    given, are the stand-ins it holds (those its checks can reach,
    grader/engine/reach.py), else every one it may. A worker that may
    `reprovision` (one started without fork, spawner.py, which nothing confines)
    takes a `switch` to any component, with the mates, trusted names and pieces
    it names: it reads their stand-ins afresh, so that one such process serves a
    grading's components one after another.
    """
    _die_with(zygote_pid)
    import torch

    from .executor import Executor
    from .state import ProcessState

    code = standins.read(standins.available_for(isolate_for, trusted, mates) if pieces is None else pieces)
    if plan.protection in (confine.LANDLOCK, confine.USERS):  # a scratch folder of its own
        import tempfile

        plan = dataclasses.replace(plan, scratch=tempfile.mkdtemp(dir=plan.scratch))
    _lock_down(output_fd, _descriptors(requests), limits, plan)
    torch.set_num_threads(1)
    folder = plan.folder
    state = ProcessState() if mates or reprovision else None  # as it was before any student code ran

    def executor_for(component: str | None, modules: tuple[str, ...]) -> Executor:
        executor = Executor(folder, component, broken, code, copies=False, mates=mates,
                            forbidden=limits.forbidden_for(component))
        for module in modules:
            try:
                executor.run("load", module=module)
            except BaseException:  # noqa: BLE001 - the request that needs the module says what went wrong
                pass
        return executor

    executor: Executor | None = executor_for(isolate_for, preload) if preload else None
    meta_before = META_MODULE in sys.modules  # imported in the zygote already (warmed)
    while True:
        try:
            request = wire.loads(requests.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        op, reset, request_id = request.pop("op"), request.pop("reset", False), request.pop("id", None)
        try:
            if op == "switch":  # the last component's code may have reached a mate's name in a request not read
                crossed = executor.package.crossed if executor is not None else None
                reply: dict[str, Any] = {"id": request_id, "ok": state is not None and _switch(executor, state),
                                         "crossed": None if crossed is None else student_text(crossed, 200)}
                if reply["ok"] and "mates" in request:  # another set of stand-ins (never read once confined)
                    reply["ok"] = reprovision and plan.protection == confine.NONE
                    if reply["ok"]:
                        mates, trusted = frozenset(request["mates"]), tuple(request["trusted"])
                        broken = dict(request["broken"])
                        pieces = None if request["pieces"] is None else frozenset(request["pieces"])
                        code = standins.read(standins.available_for(request["component"], trusted, mates)
                                             if pieces is None else pieces)
                if reply["ok"]:
                    isolate_for = request["component"]
                    executor = executor_for(isolate_for, request.get("preload", ()))
                requests.send_bytes(wire.dumps(reply))
                continue
            if executor is None:
                executor = executor_for(isolate_for, ())
            if reset:
                executor.run("reset")
            reply = {"ok": executor.run(op, **request)}
        except StudentError as exc:
            kind = "not_started" if isinstance(exc, NotStarted) else type(exc).__name__
            reply = {"error": {"class": kind, "type": student_text(exc.type_name, 200), "message": wire_text(exc.message),
                               "where": [list(f) for f in exc.frames] if exc.frames else student_text(str(exc.where)), "kinds": [student_text(k, 200) for k in exc.kinds[:64]]}}
        except SystemExit as exc:
            reply = {"error": {"class": "StudentError", "type": "SystemExit",
                               "message": student_text(f"the code called sys.exit({exc.code!r})"), "where": "", "kinds": ["SystemExit"]}}
        except BaseException as exc:  # noqa: BLE001 - whatever the student raised
            name = student_text(type(exc).__name__, 200)
            reply = {"error": {"class": "StudentError", "type": name,
                               "message": student_text(_safe_str(exc)), "where": "", "kinds": [name]}}
        if mates and executor is not None and executor.package.crossed:  # whatever the code made of CrossedOver
            reply = {"error": {"class": "CrossedOver", "type": "CrossedOver",
                               "message": student_text(executor.package.crossed, 200), "where": "", "kinds": []}}
        reply["id"] = request_id
        if not meta_before and META_MODULE in sys.modules:  # on every reply: some are never read
            reply["meta_loaded"] = True
        try:
            data = wire.dumps(reply)
        except Exception as exc:  # noqa: BLE001 - a result that is not data
            data = wire.dumps({"id": request_id, "error": {"class": "BadResult", "type": "TypeError", "where": "",
                                                           "kinds": ["TypeError"], "message": student_text(str(exc))}})
        requests.send_bytes(data)


def _descriptors(requests: "Connection | wire.Frames") -> tuple[int, ...]:
    """The descriptors the requests travel over (a spawned worker's are two pipes)."""
    if isinstance(requests, wire.Frames):
        return (requests.read_fd, requests.write_fd)
    return (requests.fileno(),)


def _switch(executor: Any, state: "ProcessState") -> bool:
    """Leave the component graded so far: drop its objects and modules, put back what its code changed in the
    process; False where the process cannot be made as it was (the grader then starts a fresh worker)."""
    try:
        if executor is not None:
            executor.close()
        gc.collect()  # what the dropped modules held (their finalizers run now, before the state is put back)
        return state.restore()
    except BaseException:  # noqa: BLE001 - a finalizer of student code that raised, say: start afresh
        return False


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises
        return f"<{type(exc).__name__} whose message cannot be shown>"


def main() -> None:
    """A worker started without fork (`python -m grader.sandbox.worker`, grader/sandbox/spawner.py): the requests
    come in on stdin and the replies go out on stdout, in wire.Frames; its output (stderr) is drained by the
    grader. The first message is the grader's own (what a zygote hands a forked worker); torch and the modules a
    zygote's worker inherits are imported before it says it is ready."""
    requests = wire.Frames(os.dup(0), os.dup(1))
    os.dup2(2, 1)  # nothing but replies on the replies' pipe: a print goes to the output
    spawn = pickle.loads(requests.recv_bytes())  # written by the grader before any student code runs here
    gc.disable()  # as the grader's own start does (grader/cli.py): no collection walks torch's objects, now or later
    import torch  # noqa: F401

    from . import executor, state  # noqa: F401
    from .torch_setup import optimizers_without_dynamo

    optimizers_without_dynamo()
    gc.freeze()
    gc.enable()
    requests.send_bytes(wire.dumps(READY))
    serve(requests, 2, spawn["plan"], spawn["isolate_for"], spawn["limits"], spawn["broken"], os.getppid(),
          spawn["preload"], spawn["trusted"], spawn["mates"], spawn.get("pieces"), reprovision=True)


if __name__ == "__main__":
    main()
