"""Student code runs here: in a worker process, never in the grader.

Workers are forked from a zygote that has already imported torch, so a worker
costs milliseconds. The grader sends requests and receives plain data
(`grader.wire`); it waits for each answer only until the check's deadline.
A hang, a crash, `os._exit`, `sys.exit` or running out of memory ends in an
exception on the grader's side that fails the check at hand; the next request
starts a fresh worker. Each worker runs in its own session (so its whole
process group can be killed), with a memory cap, its output drained into a
capped buffer, and, when the grader runs as root, as an unprivileged user.
"""
from __future__ import annotations

import atexit
import ctypes
import dataclasses
import os
import pickle
import signal
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable

from . import sandbox, wire
from .sandbox import Plan

MESSAGE_LIMIT = 4000
REPLY_LIMIT = 256 * 1024 * 1024  # no honest answer comes near this
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 10.0  # per check
    memory_mb: int = 2048  # address space a worker may add to what torch already maps
    output_bytes: int = 64 * 1024  # output kept per worker; the rest is drained and dropped
    startup_s: float = 10.0  # a fresh worker's own set-up (sandbox, imports, warm-up): not the first check's time


class WorkerTimeout(Exception):
    """The worker did not answer before the check's deadline (it was killed)."""


class WorkerDied(Exception):
    """The worker process ended while running a request."""


# --------------------------------------------------------------------------- worker side


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux
        pass


def _confine(output_fd: int, keep_fd: int, limits: Limits, plan: Plan) -> None:
    """Lock the worker down before any student code runs (grader/sandbox.py does the confinement proper)."""
    import resource

    os.setsid()
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(output_fd, 1)
    os.dup2(output_fd, 2)
    os.closerange(3, keep_fd)
    os.closerange(keep_fd + 1, 1 << 16)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    sys.dont_write_bytecode = True
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    with open("/proc/self/statm") as statm:  # before the sandbox: it may have no /proc
        mapped = int(statm.read().split()[0]) * resource.getpagesize()
    try:
        sandbox.confine(plan)
    except BaseException:  # noqa: BLE001 - never run student code less confined than the report says
        os._exit(sandbox.SANDBOX_FAILED)
    if plan.protection != sandbox.NAMESPACES:  # there /tmp is a tmpfs of its own with a size limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (sandbox.SCRATCH_MB << 20, sandbox.SCRATCH_MB << 20))
    if os.getuid() >= sandbox.WORKER_UID_BASE:  # a user of its own (as root): a fork bomb stops here
        resource.setrlimit(resource.RLIMIT_NPROC, (256, 256))
    if limits.memory_mb:
        cap = mapped + limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def _die_with(parent_pid: int) -> None:
    """Be killed when the zygote dies (even mid-hang); it dies with the grader."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before this line
        os._exit(1)


def serve(requests: Connection, output_fd: int, plan: Plan, isolate_for: str | None, limits: Limits,
          broken: dict[str, str], zygote_pid: int, preload: tuple[str, ...] = (), trusted: tuple[str, ...] = ()) -> None:
    """The worker's main loop: answer requests until the pipe closes.

    `preload` names modules to import before the first request (a failure
    there is reported again by the request that needs the module). The
    stand-ins this worker may use are read before it is confined: the files
    of the others are out of its reach from then on.
    """
    _die_with(zygote_pid)
    import torch

    from . import standins
    from .target import Executor, NotStarted, StudentError

    code = standins.read(standins.available_for(isolate_for, trusted))
    if plan.protection in (sandbox.LANDLOCK, sandbox.USERS):  # a scratch folder of its own
        import tempfile

        plan = dataclasses.replace(plan, scratch=tempfile.mkdtemp(dir=plan.scratch))
    _confine(output_fd, requests.fileno(), limits, plan)
    torch.set_num_threads(1)
    folder = plan.folder
    executor: Executor | None = None
    for module in preload:
        try:
            executor = executor or Executor(folder, isolate_for, broken, code)
            executor.run("load", module=module)
        except BaseException:  # noqa: BLE001 - the request that needs the module says what went wrong
            pass
    meta_before = META_MODULE in sys.modules  # imported in the zygote already (warmed)
    while True:
        try:
            request = wire.loads(requests.recv_bytes())
        except (EOFError, OSError):
            os._exit(0)
        op, reset = request.pop("op"), request.pop("reset", False)
        try:
            if executor is None:
                executor = Executor(folder, isolate_for, broken, code)
            if reset:
                executor.run("reset")
            reply: dict[str, Any] = {"ok": executor.run(op, **request)}
        except StudentError as exc:
            kind = "not_started" if isinstance(exc, NotStarted) else type(exc).__name__
            reply = {"error": {"class": kind, "type": exc.type_name, "message": exc.message[:MESSAGE_LIMIT],
                               "where": exc.where[:MESSAGE_LIMIT], "kinds": list(exc.kinds)}}
        except SystemExit as exc:
            reply = {"error": {"class": "StudentError", "type": "SystemExit",
                               "message": f"the code called sys.exit({exc.code!r})", "where": "", "kinds": ["SystemExit"]}}
        except BaseException as exc:  # noqa: BLE001 - whatever the student raised
            reply = {"error": {"class": "StudentError", "type": type(exc).__name__,
                               "message": _safe_str(exc)[:MESSAGE_LIMIT], "where": "", "kinds": [type(exc).__name__]}}
        if not meta_before and META_MODULE in sys.modules:  # on every reply: some are never read
            reply["meta_loaded"] = True
        try:
            data = wire.dumps(reply)
        except Exception as exc:  # noqa: BLE001 - a result that is not data
            data = wire.dumps({"error": {"class": "BadResult", "type": "TypeError", "where": "", "kinds": ["TypeError"],
                                         "message": str(exc)}})
        requests.send_bytes(data)


def _safe_str(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a __str__ that raises
        return f"<{type(exc).__name__} whose message cannot be shown>"


# --------------------------------------------------------------------------- the zygote
#
# The zygote is forked from the grader right after `import torch`, before any
# check is imported or any thread is started. It forks workers on request, so a
# worker starts in milliseconds with torch already imported and its memory holds
# nothing of the checks. Workers are the zygote's children: it reaps them and
# tells the grader how each ended. Requests go out without waiting; the answers
# come back in order, one record each.

_zygote: socket.socket | None = None
_zygote_pid: int | None = None
_awaiting: deque[Callable[[dict, list[int]], None]] = deque()  # who takes each answer still to come


def start_zygote() -> None:
    """Fork the zygote (once per grader process)."""
    global _zygote, _zygote_pid
    if _zygote is not None:
        return
    import torch  # noqa: F401 - the point: workers inherit it imported

    from .torch_setup import optimizers_without_dynamo

    optimizers_without_dynamo()

    _prctl(PR_SET_CHILD_SUBREAPER, 1)  # what student code leaves running comes back to the grader to be killed
    grader_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:  # the zygote
        try:
            grader_end.close()
            _zygote_loop(zygote_end)
        finally:
            os._exit(0)
    zygote_end.close()
    _zygote, _zygote_pid = grader_end, pid
    atexit.register(stop_zygote)


def start_own_zygote() -> None:
    """In a forked copy of the grader: leave the parent's zygote alone and fork one's own."""
    global _zygote, _zygote_pid
    if _zygote is not None:
        _zygote.close()  # this copy of the socket only; the parent keeps talking on its own
    _zygote, _zygote_pid = None, None
    _awaiting.clear()
    start_zygote()


def pin_to_core(core: int) -> None:
    """Keep this process, its zygote and the workers forked from now on, on one core (where allowed)."""
    for pid in (0, _zygote_pid):
        if pid is not None:
            try:
                os.sched_setaffinity(pid, {core})
            except OSError:  # not allowed here, or the zygote is gone: only speed is lost
                pass


def stop_zygote() -> None:
    """End the zygote, and with it every worker it forked."""
    global _zygote, _zygote_pid
    _awaiting.clear()
    if _zygote is not None:
        _zygote.close()
        _zygote = None
    if _zygote_pid is not None:
        try:
            os.kill(_zygote_pid, signal.SIGKILL)
            os.waitpid(_zygote_pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        _zygote_pid = None


def _tell_zygote(request: dict) -> None:
    """A request the zygote does not answer."""
    start_zygote()
    assert _zygote is not None
    _send_msg(_zygote, request)


def _ask_zygote(request: dict, on_answer: Callable[[dict, list[int]], None]) -> None:
    _tell_zygote({**request, "answer": True})
    _awaiting.append(on_answer)


def _take_answers(until: Callable[[], bool]) -> None:
    while not until():
        on_answer = _awaiting.popleft()
        on_answer(*_recv_msg(_zygote, with_fds=2))


def _zygote_loop(sock: socket.socket) -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    me = os.getpid()
    ended: dict[int, int] = {}  # pid -> wait status, for workers that ended before the grader asked
    while True:
        try:
            request = _recv_msg(sock)
        except (EOFError, OSError):
            return
        _reap_ended(ended)
        if request["cmd"] == "warm":
            warm_up()
        elif request["cmd"] == "reap":
            status = _wait_for(request["pid"], ended, request.get("grace", 0.0))
            if request["answer"]:
                _send_msg(sock, {"status": status})
        else:
            _fork_worker(sock, request, me)


def _reap_ended(ended: dict[int, int]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        ended[pid] = status


def _wait_for(pid: int, ended: dict[int, int], grace: float = 0.0) -> int | None:
    """How worker `pid` ended; given a `grace` period, it may end on its own first (then it is killed)."""
    if pid in ended:
        return ended.pop(pid)
    deadline = time.monotonic() + grace
    try:
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.005)
        for kill in (os.killpg, os.kill):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def _fork_worker(sock: socket.socket, request: dict, zygote_pid: int) -> None:
    requests_grader, requests_worker = socket.socketpair()
    out_read, out_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            sock.close()
            requests_grader.close()
            os.close(out_read)
            serve(Connection(os.dup(requests_worker.fileno())), out_write, request["plan"], request["isolate_for"],
                  request["limits"], request["broken"], zygote_pid, request["preload"], request["trusted"])
        finally:
            os._exit(0)
    requests_worker.close()
    os.close(out_write)
    _send_msg(sock, {"pid": pid}, fds=[requests_grader.fileno(), out_read])
    requests_grader.close()
    os.close(out_read)


# Imported by torch on the first operation on meta tensors (over a second: it and 800 more modules, sympy too).
META_MODULE = "torch._dynamo"
_meta_loaded_by_a_worker = False


def warm_up() -> None:
    """Import what torch loads lazily on first use of meta tensors (seconds, once per process).

    The masking checks run student code with meta as the default device; code
    that builds its mask without `device=` then computes on meta tensors.
    """
    import torch

    torch.ones(2, 2, dtype=torch.bool, device="meta").tril()


def _send_msg(sock: socket.socket, message: dict, fds: list[int] = ()) -> None:
    data = pickle.dumps(message)
    header = len(data).to_bytes(8, "little")
    if fds:
        socket.send_fds(sock, [header + data], list(fds))
    else:
        sock.sendall(header + data)


def _recv_msg(sock: socket.socket, with_fds: int = 0) -> dict | tuple[dict, list[int]]:
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 1 << 16, with_fds)
    else:
        data, fds = sock.recv(1 << 16), []
    if not data:
        raise EOFError
    size = int.from_bytes(data[:8], "little")
    data = data[8:]
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    message = pickle.loads(data)
    return (message, fds) if with_fds else message


def warm_zygote() -> None:
    """Ask the zygote to pre-import torch's lazily loaded parts, for the workers forked after."""
    _tell_zygote({"cmd": "warm"})


def a_worker_loaded_meta() -> bool:
    """Whether a worker of this process imported torch's meta-tensor machinery (see warm_up)."""
    return _meta_loaded_by_a_worker


# --------------------------------------------------------------------------- grader side


class Worker:
    """One worker process for one implementation folder and one component's isolation."""

    def __init__(self, plan: Plan, isolate_for: str | None, limits: Limits, broken: dict[str, str] | None = None,
                 preload: tuple[str, ...] = (), trusted: tuple[str, ...] = ()) -> None:
        self.plan, self.isolate_for, self.limits, self.trusted = plan, isolate_for, limits, tuple(trusted)
        self.broken = dict(broken or {})
        self.preload = tuple(preload)
        self.timed_out: set[str] = set()  # calls that hung once: later ones fail at once
        self.output = bytearray()
        self.output_dropped = 0
        self.pid: int | None = None
        self._conn: Connection | None = None
        self._ahead: list[str | None] = []  # requests sent without waiting: the label whose error counts, or None
        self.earlier_error: dict | None = None  # the reply of the first of those that failed
        self._spawning = False  # asked of the zygote, not answered yet
        self._reset_first = False  # the next request first drops the objects made so far
        self._fresh = False  # spawned and not asked anything yet

    def spawn(self) -> None:
        """Have the zygote fork this worker, without waiting (it imports `preload` meanwhile)."""
        if self.pid is not None or self._spawning:
            return
        _ask_zygote({"cmd": "spawn", "plan": self.plan, "isolate_for": self.isolate_for, "limits": self.limits,
                     "broken": self.broken, "preload": self.preload, "trusted": self.trusted}, self._attach)
        self._spawning = True

    def _start(self) -> None:
        self.spawn()
        _take_answers(until=lambda: not self._spawning)

    def _attach(self, message: dict, fds: list[int]) -> None:
        self._spawning = False
        self.pid = message["pid"]
        self._conn = Connection(fds[0])
        self._ahead = []
        self._reset_first = False
        self._fresh = bool(self.preload)  # its first answer may wait for what it imports first
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
        return wire.dumps(message)

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
        assert self._conn is not None
        if self._fresh:
            deadline, self._fresh = deadline + self.limits.startup_s, False
        try:
            self._conn.send_bytes(self._encode(message))
            while self._ahead:  # the answers to requests sent ahead come first
                data = self._receive(deadline)
                if self._ahead.pop(0) is not None and self.earlier_error is None:
                    earlier = self._decode(data)
                    if "error" in earlier:
                        self.earlier_error = earlier
            data = self._receive(deadline)
        except (EOFError, OSError) as exc:
            code = self.kill(grace=0.5)  # it is ending: let it, so that its status says how
            raise WorkerDied(_describe_exit(code)) from exc
        return self._decode(data)

    def _receive(self, deadline: float) -> bytes:
        assert self._conn is not None
        if not self._conn.poll(max(deadline - time.monotonic(), 0.0)):
            self.kill()
            raise WorkerTimeout()
        return self._conn.recv_bytes(REPLY_LIMIT)

    def _decode(self, data: bytes) -> dict:
        global _meta_loaded_by_a_worker
        try:
            reply = wire.loads(data)
        except wire.WireError as exc:
            self.kill()
            raise WorkerDied(f"sent something that is not data ({exc})") from None
        if isinstance(reply, dict) and reply.pop("meta_loaded", False):
            _meta_loaded_by_a_worker = True
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
        if pid is None:
            return None
        if not grace:
            for kill in (os.killpg, os.kill):
                try:
                    kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        if _zygote is None:  # stopped, and its workers with it
            return None
        if not how_it_ended:
            try:
                _tell_zygote({"cmd": "reap", "pid": pid, "answer": False})
            except OSError:
                pass
            return None
        answer: dict = {}
        try:
            _ask_zygote({"cmd": "reap", "pid": pid, "grace": grace}, lambda message, fds: answer.update(message))
            _take_answers(until=lambda: bool(answer))
        except (OSError, EOFError, IndexError):  # the zygote is gone, and its workers with it
            return None
        return None if answer["status"] is None else os.waitstatus_to_exitcode(answer["status"])


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "the worker process stopped answering"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (a segmentation fault)" if name == "SIGSEGV" else " (killed: out of memory?)" if name == "SIGKILL" else ""
        return f"the process crashed with {name}{hint}"
    if code == sandbox.SANDBOX_FAILED:
        return "the grader could not set up the sandbox for this worker (a grader error, not yours)"
    return f"the process exited with status {code} (os._exit or a crash in native code)"


def _descendants() -> list[int]:
    """Every process descended from this one or from its zygote, except the zygote itself."""
    me = os.getpid()
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                ppid = int(stat.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    # the grader's other descendants, and the zygote's: workers left running, and what student code left
    found, stack = [], [p for p in children.get(me, []) if p != _zygote_pid] + children.get(_zygote_pid, [])
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
    stop_zygote()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child left
        if pid == 0:
            kill_strays()
            time.sleep(0.01)
