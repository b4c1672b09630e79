"""The zygote: a fork server that workers start from in milliseconds.

The zygote is forked from the grader right after `import torch`, before any
check is imported or any thread is started. It forks workers on request, so a
worker starts with torch already imported and its memory holds nothing of the
checks. Workers are the zygote's children: it reaps them and tells the grader
how each ended. Requests go out without waiting; the answers come back in
order, one record each.

`ZYGOTE` is the one `Zygote` of a grading process, as multiprocessing's
forkserver keeps one `ForkServer`: its state (the socket, the pid, who takes
each answer still to come) changes only through its methods.
"""
from __future__ import annotations

import atexit
import gc
import os
import pickle
import signal
import socket
import time
from collections import deque
from multiprocessing.connection import Connection
from typing import Callable

from .budget import forget
from .confine import fork
from .spawner import spawning
from .worker import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, prctl, serve

Answer = Callable[[dict, list[int]], None]


class Zygote:
    """The grader's side of its zygote process (see the module docstring)."""

    def __init__(self) -> None:
        self._sock: socket.socket | None = None
        self.pid: int | None = None
        self.owner: int | None = None  # the process that forked it (a forked copy of that one inherits it)
        self._awaiting: deque[Answer] = deque()  # who takes each answer still to come
        self.meta_loaded = False  # a worker imported torch's meta-tensor machinery (see warm_up)
        self._warmed = False  # torch's kernels run once in this process (or the one it was forked from)

    @property
    def running(self) -> bool:
        return self._sock is not None

    def start(self) -> None:
        """Fork the zygote (once per grading process). Where workers are started without fork (spawner.py), only
        this process's own set-up: torch's optimizers and kernels, the objects frozen."""
        if self._sock is not None:
            return
        # The point: workers inherit torch imported, and what each one imports before its first request (the
        # implementation's side of the boundary).
        try:
            import resource  # noqa: F401
        except ImportError:  # (Windows: workers are spawned, and have no rlimits)
            pass
        import torch  # noqa: F401

        from . import executor, state  # noqa: F401
        from .torch_setup import optimizers_without_dynamo, warm_kernels

        if not self._warmed:  # a forked grading process inherits it done
            optimizers_without_dynamo()
            warm_kernels()  # once here rather than in every worker
            self._warmed = True
        # What is imported by now lives as long as the process: out of the collector's reach, no full
        # collection walks torch's 200,000 objects (0.1 s) here, nor touches their pages in a worker.
        gc.freeze()
        if spawning():
            return
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # what student code leaves running comes back to the grader to be killed
        grader_end, zygote_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:  # the zygote
            try:
                grader_end.close()
                _zygote_loop(zygote_end)
            finally:
                os._exit(0)
        zygote_end.close()
        self._sock, self.pid, self.owner = grader_end, pid, os.getpid()
        atexit.register(self.stop)

    def start_own(self) -> None:
        """In a forked copy of the grader: leave the parent's zygote alone and fork one's own."""
        if self._sock is not None:
            self._sock.close()  # this copy of the socket only; the parent keeps talking on its own
        self._sock, self.pid, self.owner = None, None, None
        self._awaiting.clear()
        self.start()

    def stop(self) -> None:
        """End the zygote, and with it every worker it forked."""
        self._awaiting.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = None

    def pin_to_core(self, core: int) -> None:
        """Keep this process, its zygote and the workers forked from now on, on one core (where allowed)."""
        for pid in (0, self.pid):
            if pid is not None:
                try:
                    os.sched_setaffinity(pid, {core})
                except OSError:  # not allowed here, or the zygote is gone: only speed is lost
                    pass

    def warm(self) -> None:
        """Have the zygote pre-import torch's lazily loaded parts, for the workers forked after."""
        self.tell({"cmd": "warm"})

    def tell(self, request: dict) -> None:
        """A request the zygote does not answer."""
        self.start()
        if self._sock is None:  # workers are started without fork here (spawner.py): nothing to tell
            return
        _send_msg(self._sock, request)

    def ask(self, request: dict, on_answer: Answer) -> None:
        """A request whose answer `on_answer` takes, once `take_answers` reaches it."""
        self.tell({**request, "answer": True})
        self._awaiting.append(on_answer)

    def take_answers(self, until: Callable[[], bool]) -> None:
        while not until():
            on_answer = self._awaiting.popleft()
            on_answer(*_recv_msg(self._sock, with_fds=2))


ZYGOTE = Zygote()


# --- the zygote process itself ---------------------------------------------------------------

def _zygote_loop(sock: socket.socket) -> None:
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Ctrl-C reaches the terminal's whole process group: the grader ends the zygote itself (a KeyboardInterrupt
    # here, mid-fork, only printed "Exception ignored ..." on the way out)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    me = os.getpid()
    ended: dict[int, int] = {}  # pid -> wait status, for workers that ended before the grader asked
    budgets: dict = {}  # pid -> its Budget, until it is reaped (then its cgroup is removed)
    while True:
        try:
            request = _recv_msg(sock)
        except (EOFError, OSError):
            return
        for pid in _reap_ended(ended):
            forget(budgets.pop(pid, None), pid)
        if request["cmd"] == "warm":
            warm_up()
        elif request["cmd"] == "reap":
            status = _wait_for(request["pid"], ended, request.get("grace", 0.0))
            forget(budgets.pop(request["pid"], None), request["pid"])
            if request["answer"]:
                _send_msg(sock, {"status": status})
        else:
            budgets[_fork_worker(sock, request, me)] = request["plan"].budget


def _reap_ended(ended: dict[int, int]) -> list[int]:
    reaped = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        ended[pid] = status
        reaped.append(pid)


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


def _fork_worker(sock: socket.socket, request: dict, zygote_pid: int) -> int:
    requests_grader, requests_worker = socket.socketpair()
    out_read, out_write = os.pipe()
    pid = fork(request["plan"])
    if pid == 0:
        try:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a worker's code sees Python's usual Ctrl-C
            sock.close()
            requests_grader.close()
            os.close(out_read)
            serve(Connection(os.dup(requests_worker.fileno())), out_write, request["plan"], request["isolate_for"],
                  request["limits"], request["broken"], zygote_pid, request["preload"], request["trusted"],
                  request["mates"], request.get("pieces"))
        finally:
            os._exit(0)
    requests_worker.close()
    os.close(out_write)
    _send_msg(sock, {"pid": pid}, fds=[requests_grader.fileno(), out_read])
    requests_grader.close()
    os.close(out_read)
    return pid


def warm_up() -> None:
    """Import what torch loads lazily on first use of meta tensors (seconds, once per process).

    The masking checks run student code with meta as the default device; code
    that builds its mask without `device=` then computes on meta tensors.
    """
    import torch

    torch.ones(2, 2, dtype=torch.bool, device="meta").tril()


# The zygote's own framing (pickle: both ends are the grader's code; student code never reaches this socket).
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
