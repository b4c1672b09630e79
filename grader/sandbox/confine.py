"""Confinement of the worker processes that run student code.

Each worker is its own unit of confinement. The protections are tried in this
order, and the first that works on the machine is used for every worker of a
run (`choose`, probed once per process, in a child from the start: `PROBE`); every
report names it.

1. "namespaces" (Linux user, PID, mount, network, IPC and UTS namespaces; as
   root without the user namespace): the worker sees a new root file system
   that holds only the Python installation and the system's libraries, read
   only, its own copy of the submission at /submission (read only), a /tmp and
   /dev/shm of its own with a size limit, a /proc of its own PID namespace, and
   no network. It cannot see, signal or trace any other process: it is PID 1
   of its namespace, and everything it starts dies with it. It runs without
   capabilities (as root: as a user id of its own, `WORKER_UID_BASE` + pid).
2. "landlock" (the Landlock LSM, for an ordinary user where namespaces are
   refused, e.g. a container): reads only of the same allow-list, writes only
   to a scratch folder of its own, no TCP, no signals outside its domain, no
   tracing of other processes.
3. "users" (as root, where neither works, e.g. a container without either):
   each worker runs as a user id of its own; the project's folders that hold
   answers are closed to other users while grading (`hidden_while_grading`);
   the network stays open.
4. "none": only the limits every worker has (memory, output, time, its own
   session, core dumps off); every report says so at its top.

The environment is scrubbed in every case, and /proc/self/environ zeroed.
`DRILLS_SANDBOX=<name>` asks for one of them (tests use it to cover each
path); a protection that does not work here falls through to the next
(`DRILLS_SANDBOX_UNAVAILABLE=a,b` makes the probe treat those as not working,
for tests). Below `INTENDED` a run refuses to grade others (`refused`) unless
the weaker protection is accepted by name (--accept-protection, or DRILLS_SANDBOX).
"""
from __future__ import annotations

import ctypes
import errno
import os
import signal
import stat
import sys
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import budget, spawner
from ..paths import ROOT, STANDINS
from ..source import COPY_GID_BASE  # "users": a private copy's group, the only one let through to it

NAMESPACES, LANDLOCK, USERS, NONE = "namespaces", "landlock", "users", "none"
ORDER = (NAMESPACES, LANDLOCK, USERS, NONE)
N_ = str  # marks a text for extraction into the catalogue; grader/i18n.py translates it where it is shown
DESCRIPTIONS = {
    NAMESPACES: N_("namespaces: each worker has its own PID, mount and network namespace, a read-only view of "
                "Python and its submission only, a size-limited scratch space, no network and no capabilities"),
    LANDLOCK: N_("landlock: each worker may read only Python and its submission, write only its own scratch folder, "
              "open no TCP connection and signal or trace no process outside it"),
    USERS: N_("users: each worker runs as a user id of its own (grading as root), which cannot read the reference, "
           "the checks or the project's history (closed to other users while grading), write its results, or signal "
           "or trace another process; the network stays open"),
    NONE: N_("NONE: no sandbox is available here; student code can read and write what the grader's user can "
          "(grades from this machine are not protected against tampering)"),
}
WORKER_UID_BASE = 1_000_000_000  # as root, each worker runs as a user id of its own: this plus its pid
SCRATCH_MB = 64
SANDBOX_FAILED = 97  # a worker's exit status when its confinement could not be set up (a grader error)

CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_NOATIME, MS_NODIRATIME, MS_REC, MS_PRIVATE, MS_RELATIME = 1024, 2048, 1 << 14, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = 155  # x86_64; aarch64 is 41
DEVICES = ("null", "zero", "full", "random", "urandom")
# Folders never bound whole into a worker's root, whatever sys.path says: they hold other people's files.
BROAD = frozenset({"/", "/tmp", "/var/tmp", "/dev", "/dev/shm", "/proc", "/sys", "/home", "/root", "/run", "/mnt",
                   "/media", "/srv", "/work", os.path.expanduser("~")})


@dataclass(frozen=True)
class Plan:
    """What a worker is told: the protection, and the folder it grades (the grader's private copy)."""

    protection: str
    submission: str  # the copy of the submission, outside the sandbox
    mountpoint: str  # an empty folder the new root is mounted on (inside the worker's own mount namespace)
    scratch: str  # landlock: the folder the worker may write
    view: "Visible | None" = None  # what the worker may read besides its submission (see `visible`)
    budget: "budget.Budget | None" = None  # memory and processes for the worker's whole tree, deadlines (budget.py)
    group: int | None = None  # "users": the group that alone may pass through to the copy (`private_copy`)

    @classmethod
    def for_copy(cls, protection: str, submission: str | Path, budget: "budget.Budget | None" = None) -> "Plan":
        """The plan for a copy made by `private_copy` (its folder holds submission/, root/ and scratch/);
        the readable paths are found once here, in the grader, not in every worker."""
        base = Path(submission).parent
        view = _visible() if protection in (NAMESPACES, LANDLOCK) else None
        group = os.stat(base).st_gid if protection == USERS and os.stat(base).st_gid >= COPY_GID_BASE else None
        return cls(protection, str(submission), str(base / "root"), str(base / "scratch"), view, budget, group)

    @property
    def folder(self) -> str:
        """The submission's folder as the worker's code sees it."""
        return "/submission" if self.protection == NAMESPACES else self.submission


def describe(protection: str) -> str:
    return DESCRIPTIONS[protection]


# --------------------------------------------------------------------------- choosing


def choose() -> str:
    """The strongest protection that works here (or the one DRILLS_SANDBOX names, where it works); "none" where
    workers are started without fork (spawner.py: each confinement here is set up in a freshly forked child)."""
    if spawner.spawning():
        return NONE
    return PROBE.choice()


STRENGTH = {NONE: 0, USERS: 1, LANDLOCK: 2, NAMESPACES: 3}
# The weakest protection a run grades with unless told otherwise: both it and namespaces show a worker only the
# allow-list (`visible`). Below it a run that grades others refuses, one that checks the learner's own code warns.
INTENDED = LANDLOCK
ACCEPT_VARIABLE = "DRILLS_ACCEPT_PROTECTION"  # set by --accept-protection


def weakest_accepted() -> str:
    """The weakest protection this run accepts: INTENDED, or a weaker one named by DRILLS_ACCEPT_PROTECTION
    (`--accept-protection`) or asked for by name with DRILLS_SANDBOX."""
    named = [os.environ.get(ACCEPT_VARIABLE, ""), os.environ.get("DRILLS_SANDBOX", "")]
    return min([INTENDED, *(n for n in named if n in STRENGTH)], key=STRENGTH.__getitem__)


REFUSED = N_("the intended protection of student code ({intended} or stronger) is not available here: the "
             "strongest that works is {strongest}. Grading other people's code with less than the intended "
             "protection is refused. Run where user namespaces or Landlock work (see docs/instructors.md, "
             "'Student code is untrusted'), or accept the weaker protection explicitly with "
             "--accept-protection {chosen} (or {variable}={chosen}).")


def refused(chosen: str) -> bool:
    """Whether grading with `chosen` is refused here (`REFUSED` says why, in the edge's language)."""
    return STRENGTH[chosen] < STRENGTH[weakest_accepted()]


def _first_that_works(wanted: str) -> str:
    order = ORDER[ORDER.index(wanted):] if wanted in ORDER else ORDER
    return next(p for p in order if works(p))


class Probe:
    """The choice of protection, probed once per process; `start` has a child probe it at once.

    The grader starts it before it imports torch (a second), so that the probe's forks and
    confinements (tens of milliseconds) run on another core meanwhile, not on the way to the
    first check. `PROBE` is the process's one Probe (what a forked copy inherits unread, it
    probes again).
    """

    def __init__(self) -> None:
        self._chosen: dict[str, str] = {}  # DRILLS_SANDBOX's value -> the protection chosen for it
        self._probing: tuple[int, int, int, str] | None = None  # (owner pid, child pid, pipe to read, wanted)

    def start(self) -> None:
        """Probe in a child process from now (without waiting)."""
        wanted = os.environ.get("DRILLS_SANDBOX", "")
        if self._probing is not None or wanted in self._chosen or spawner.spawning():
            return
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(read_end)
                os.write(write_end, _first_that_works(wanted).encode())
            finally:
                os._exit(0)
        os.close(write_end)
        self._probing = (os.getpid(), pid, read_end, wanted)

    def choice(self) -> str:
        wanted = os.environ.get("DRILLS_SANDBOX", "")
        if self._probing is not None and self._probing[0] == os.getpid() and self._probing[3] == wanted:
            self._collect()
        if wanted not in self._chosen:
            self._chosen[wanted] = _first_that_works(wanted)
        return self._chosen[wanted]

    def close(self) -> None:
        """Wait for a probe still running (a command that never asked for its answer)."""
        if self._probing is not None and self._probing[0] == os.getpid():
            self._collect()

    def _collect(self) -> None:
        assert self._probing is not None
        _, pid, read_end, wanted = self._probing
        self._probing = None
        with os.fdopen(read_end, "rb") as answer:
            name = answer.read().decode()
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        if name in ORDER:  # else the child failed: probe here
            self._chosen[wanted] = name


PROBE = Probe()


@lru_cache(maxsize=None)
def works(protection: str) -> bool:
    """Try the protection in a throw-away child (milliseconds)."""
    if protection == NONE:
        return True
    if protection in os.environ.get("DRILLS_SANDBOX_UNAVAILABLE", "").split(","):  # tests: as on a machine without it
        return False
    if sys.platform != "linux" or protection == USERS and (os.geteuid() != 0 or not _python_world_readable()):
        return False
    import tempfile

    with tempfile.TemporaryDirectory(prefix="drills-probe-") as tmp:
        os.chmod(tmp, 0o711)  # (`private_copy(reachable=True)` gives it a group of its own, 0710)
        for name in ("submission", "root", "scratch"):
            os.mkdir(os.path.join(tmp, name), 0o711 if name == "scratch" else 0o755)
        plan = Plan(protection, os.path.join(tmp, "submission"), os.path.join(tmp, "root"), os.path.join(tmp, "scratch"))
        pid = os.fork()
        if pid == 0:
            try:
                os.closerange(3, 1 << 16)
                confine(plan)
                hidden = protection == USERS and os.getuid() >= WORKER_UID_BASE  # (closed while grading only)
                try:
                    open(os.path.abspath(__file__)).close()
                except OSError:
                    hidden = True
                os._exit(0 if hidden and os.listdir(plan.folder) == [] else 1)
            except BaseException:  # noqa: BLE001 - any failure means "not here"
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) == 0


# --------------------------------------------------------------------------- confining (worker side)

try:
    _libc = ctypes.CDLL(None, use_errno=True)
except (OSError, TypeError):  # Windows: no C library by that name (nothing here runs there: spawner.py)
    _libc = None


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    _check(_libc.mount(source.encode() if source else None, target.encode(), fstype.encode() if fstype else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def confine(plan: Plan) -> None:
    """Confine this (single-threaded, freshly forked) process as the plan says; returns in the confined process.

    With namespaces the process returned is PID 1 of a PID namespace of its own: born
    there (`fork`), or else this one forks, stays outside as the worker's stand-in
    (waiting for it, then ending the same way), and the new PID 1 returns.
    """
    block = _environment_block()  # /proc may be out of reach once confined
    budget.enter(plan.budget, _outer_pid())  # a cgroup of its own for its whole tree, where cgroups can be had
    if plan.protection == NAMESPACES:
        _enter_namespaces(plan)
    elif plan.protection == LANDLOCK:
        _landlock(plan)
    elif plan.protection == USERS:
        _own_user(plan)
    _scrub_environment(plan, block)


@lru_cache(maxsize=1)
def _readable_paths() -> tuple[str, ...]:
    return tuple(readable_paths())


def _torch_file() -> str:
    """torch's __init__.py, found without importing torch (the probe runs while the grader imports it)."""
    import importlib.util

    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        raise ImportError("torch is not installed")
    return spec.origin


# The distributions whose code a worker may import: the contract's (torch, numpy, einops, regex) and what they require
# (their Requires-Dist, without extras, followed to the end). Nothing else installed beside them is visible.
ALLOWED_DISTRIBUTIONS = ("torch", "numpy", "einops", "regex")
# The system's folders a worker reads whole (shared libraries, ld.so's cache, locale data); what lies under them
# that is not allowed (a site-packages, the project, the working directory) is hidden (`Visible.masks`).
SYSTEM = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc")


@dataclass(frozen=True)
class Visible:
    """What a worker may read, from an explicit allow-list (never from sys.path): `roots` whole, except the
    `masks` under them (hidden behind an empty folder), then the `entries` (the allowed distributions' own files
    and folders, wherever they lie). `exact` is the same set as a list of paths none of which holds a masked one
    (Landlock allows whole trees only)."""

    roots: tuple[str, ...]
    masks: tuple[str, ...]
    entries: tuple[str, ...]
    exact: tuple[str, ...]


def _norm(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=1)
def allowed_entries() -> tuple[str, ...]:
    """The top-level files and folders of the allowed distributions and of what they require (never the
    grader's own distribution, whatever the install mode)."""
    import importlib.metadata as metadata
    import re

    grader_dir = Path(__file__).resolve().parent.parent
    seen: set[str] = set()
    todo = list(ALLOWED_DISTRIBUTIONS)
    entries: set[str] = set()
    while todo:
        name = todo.pop()
        if _norm(name) in seen or _norm(name) == "transformer-drills":
            continue
        seen.add(_norm(name))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        for requirement in dist.requires or []:
            if "extra ==" not in requirement.replace("'", '"').replace('extra=="', 'extra == "'):
                match = re.match(r"[A-Za-z0-9._-]+", requirement)
                if match:
                    todo.append(match.group())
        tops = set()
        for line in (dist.read_text("RECORD") or "").splitlines():  # (dist.files makes a path object per file)
            top = line.split(",", 1)[0].replace("\\", "/").split("/", 1)[0]
            if top and top not in ("..", "__pycache__") and not top.endswith(".pth"):
                tops.add(top)
        for top in tops:
            path = os.path.normpath(str(dist.locate_file(top)))
            if os.path.exists(path) and not Path(os.path.realpath(path)).is_relative_to(grader_dir):
                entries.add(path)
    if not any(Path(e).name == "torch" for e in entries):  # torch installed without metadata: its folders
        base = Path(_torch_file()).resolve().parent
        entries.update(str(base.parent / n) for n in ("torch", "functorch", "torchgen") if (base.parent / n).exists())
    return tuple(sorted(entries))


def _stdlib_dirs() -> list[str]:
    import importlib.util
    import sysconfig

    dirs = {os.path.dirname(os.__file__), sysconfig.get_path("stdlib")}
    for module in ("_ctypes", "math", "_socket"):  # lib-dynload
        spec = importlib.util.find_spec(module)
        if spec is not None and spec.origin and os.path.isabs(spec.origin):
            dirs.add(os.path.dirname(spec.origin))
    return sorted(d for d in dirs if d and os.path.isdir(d))


def _site_dirs() -> set[str]:
    """Every folder that may hold installed packages (hidden unless an allowed entry is bound back into it)."""
    import site
    import sysconfig

    dirs = set(site.getsitepackages() if hasattr(site, "getsitepackages") else [])
    try:
        dirs.add(site.getusersitepackages())
    except Exception:  # noqa: BLE001
        pass
    for scheme in sysconfig.get_scheme_names():
        for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, "/usr", "/usr/local"}:
            for key in ("purelib", "platlib"):
                try:
                    dirs.add(sysconfig.get_path(key, scheme, vars={"base": prefix, "platbase": prefix,
                                                                   "userbase": prefix}))
                except (KeyError, ValueError):
                    pass
    dirs.update(p for p in sys.path if p.endswith(("site-packages", "dist-packages")))
    major = f"python{sys.version_info[0]}"
    dirs.update({f"/usr/lib/{major}/dist-packages", f"/usr/local/lib/{major}/dist-packages"})
    for entry in allowed_entries():
        dirs.add(os.path.dirname(entry))
    return {os.path.normpath(d) for d in dirs if d}


def visible() -> Visible:
    """The allow-list a worker sees (see `Visible`), computed once per process (`_visible`)."""
    project = ROOT
    stdlib = _stdlib_dirs()
    roots: list[str] = []
    for path in sorted({*SYSTEM, *stdlib, sys.base_prefix, sys.base_exec_prefix}, key=len):
        if not os.path.lexists(path) or (not os.path.islink(path) and not os.path.isdir(path)):
            continue
        real = os.path.realpath(path)
        if real in BROAD or Path(real).is_relative_to(project) and path not in stdlib:
            continue
        if not any(Path(path).is_relative_to(k) for k in roots):
            roots.append(path)
    entries = [e for e in allowed_entries() if os.path.realpath(e) not in BROAD]
    hide = {*_site_dirs(), str(project)}
    try:
        hide.add(os.getcwd())
    except OSError:
        pass
    masks = []
    for path in sorted(hide, key=len):
        inside_root = any(Path(path).is_relative_to(r) and path != r for r in roots)
        holds_needed = any(Path(s).is_relative_to(path) for s in [*roots, *stdlib])
        if inside_root and not holds_needed and os.path.isdir(path) \
                and not any(Path(path).is_relative_to(m) for m in masks):
            masks.append(path)
    return Visible(tuple(roots), tuple(masks), tuple(entries), tuple(_exact(roots, masks, entries)))


def _exact(roots: list[str], masks: list[str], entries: list[str]) -> list[str]:
    """The roots with each masked folder cut out (its siblings on the way down listed instead), and the entries."""
    def cut(path: str) -> list[str]:
        inner = [m for m in masks if Path(m).is_relative_to(path)]
        if not inner:
            return [path]
        if path in inner or os.path.islink(path) or not os.path.isdir(path):
            return []
        kept = []
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return []
        for name in names:
            kept += cut(os.path.join(path, name))
        return kept

    out = []
    for root in roots:
        out += cut(root)
    return out + [e for e in entries if e not in out]


@lru_cache(maxsize=1)
def _visible() -> Visible:
    return visible()


def readable_paths() -> list[str]:
    """What a worker needs to read, as one list of trees (Landlock's rules): see `visible`."""
    return list(_visible().exact)


def fork(plan: Plan) -> int:
    """os.fork() for a worker that `plan` confines. As root under "namespaces" the child is born PID 1 of a PID
    namespace of its own: the worker then needs no fork of its own to get there (each costs milliseconds in a
    process that holds torch). Elsewhere, or where the kernel refuses, a plain fork (the worker then makes its
    PID namespace itself, `_enter_namespaces`)."""
    own = _own_pid_namespace() if plan.protection == NAMESPACES and os.getuid() == 0 else None
    if own is None or _libc.unshare(CLONE_NEWPID) != 0:  # (refused too if a restore below ever failed)
        return os.fork()
    pid = -1
    try:
        pid = os.fork()
    finally:
        if pid != 0:  # this process's next children are born in its own PID namespace again
            _libc.setns(own, CLONE_NEWPID)
    return pid


@lru_cache(maxsize=1)
def _own_pid_namespace() -> int | None:
    """A descriptor of this process's PID namespace, opened once (workers close it with every other)."""
    try:
        return os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _enter_namespaces(plan: Plan) -> None:
    uid, gid = os.getuid(), os.getgid()
    root = uid == 0
    born_inside = os.getpid() == 1  # forked into a PID namespace of its own by `fork`
    outer = _outer_pid()
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | (0 if born_inside else CLONE_NEWPID)
    _check(_libc.unshare(flags if root else flags | CLONE_NEWUSER), "unshare")
    if not root:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)
    if not born_inside:
        child = os.fork()
        if child:  # outside: the worker as the zygote knows it, which ends as the namespace's PID 1 ends
            _end_as(child)
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # (its parent is outside: getppid() says 0)
    # PID 1 of the namespace from here: when it ends, the kernel kills everything left in the namespace
    _new_root(plan)
    if root:  # no capabilities outside a user namespace of its own: become a user of its own
        worker_uid = WORKER_UID_BASE + outer
        os.setgroups([])
        os.setgid(worker_uid)
        os.setuid(worker_uid)
    else:
        _drop_capabilities()
        budget.limit_processes(plan.budget)  # counted in its own user namespace: its tree's processes only
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # again: a change of credentials clears it
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def _outer_pid() -> int:
    """This process's pid as the grader sees it (/proc is still the grader's here), whatever namespace it is in."""
    try:
        return int(os.readlink("/proc/self"))
    except (OSError, ValueError):
        return os.getpid()


def _end_as(child: int) -> None:
    """Wait for `child`, then end as it ended."""
    os.closerange(0, 1 << 16)
    while True:
        try:
            _, status = os.waitpid(child, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
    code = os.waitstatus_to_exitcode(status)  # negative: killed by that signal
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code)


def _lock_flags(path: str) -> int:
    """The mount flags of the mount `path` is on that a remount must keep (they are locked in a user namespace)."""
    f_flag = os.statvfs(path).f_flag
    flags = 0
    for st, ms in ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
                   (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME)):
        if f_flag & st:
            flags |= ms
    return flags


def _bind(source: str, target: str, *, recursive: bool = False) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(source, target, None, MS_BIND | (MS_REC if recursive else 0))
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | _lock_flags(source))


def _new_root(plan: Plan) -> None:
    new = plan.mountpoint
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755")
    for folder in ("/tmp", "/dev/shm"):  # the scratch space first: what is read from under /tmp is bound over it
        os.makedirs(new + folder)
        _mount("tmpfs", new + folder, "tmpfs", MS_NOSUID | MS_NODEV, f"size={SCRATCH_MB}m,nr_inodes=4096,mode=1777")
    view = plan.view or _visible()
    for path in view.roots:
        inside = new + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(inside), exist_ok=True)
            if not os.path.lexists(inside):
                os.symlink(os.readlink(path), inside)
        elif os.path.exists(path) and not os.path.exists(inside):
            _bind(path, inside, recursive=True)
    masked = []
    for path in view.masks:  # what the roots hold that is not allowed: an empty folder over it
        if os.path.isdir(new + path):
            _mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,nr_inodes=2048,mode=0755")
            masked.append(new + path)
    for path in view.entries:  # the allowed distributions, wherever they lie (inside a mask, or outside a root)
        inside = new + path
        if not os.path.lexists(inside):
            _bind(path, inside, recursive=os.path.isdir(path))
    for path in masked:
        _mount(None, path, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _bind(plan.submission, new + "/submission")
    os.makedirs(new + "/dev", exist_ok=True)
    for device in DEVICES:
        if os.path.exists(f"/dev/{device}"):
            _bind(f"/dev/{device}", f"{new}/dev/{device}")
    for folder in ("/proc", "/.old"):
        os.makedirs(new + folder, exist_ok=True)
    _check(_libc.syscall(SYS_PIVOT_ROOT if os.uname().machine == "x86_64" else 41, new.encode(), (new + "/.old").encode()),
           "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.old", MNT_DETACH), "umount old root")
    os.rmdir("/.old")
    try:  # a /proc of its own PID namespace; refused in a user namespace where the host's /proc is partly masked
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    except PermissionError:
        pass  # then no /proc at all: never the host's, which would show the grader's memory
    _mount(None, "/", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir("/tmp")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _drop_capabilities() -> None:
    """No capabilities at all (inside its user namespace the worker would otherwise have every one)."""
    PR_CAPBSET_DROP = 24
    for cap in range(64):
        _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), ctypes.byref(data)), "capset")


# --------------------------------------------------------------------------- Landlock

_LANDLOCK_CREATE_RULESET, _LANDLOCK_ADD_RULE, _LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_READ = (1 << 0) | (1 << 2) | (1 << 3)  # execute, read file, read dir
_ALL_FS = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def landlock_abi() -> int:
    abi = _libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), _LANDLOCK_CREATE_RULESET_VERSION)
    return max(abi, 0)


def _landlock(plan: Plan) -> None:
    abi = landlock_abi()
    if abi < 1:
        raise OSError(errno.ENOSYS, "Landlock is not available")
    handled = _ALL_FS.get(abi, (1 << 16) - 1)
    attr = _RulesetAttr(handled, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)  # TCP bind/connect; signals, sockets
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = _libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path, access in ([(p, _READ) for p in [*(plan.view or _visible()).exact, plan.submission, "/dev", "/proc"]]
                             + [(plan.scratch, handled)]):
            if not os.path.exists(path):
                continue
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
                rule = _PathBeneath(access if is_dir else access & ((1 << 0) | (1 << 2)), fd)
                _check(_libc.syscall(_LANDLOCK_ADD_RULE, ruleset, 1, ctypes.byref(rule), 0), f"landlock rule {path}")
            finally:
                os.close(fd)
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.syscall(_LANDLOCK_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    os.chdir(plan.scratch)


# --------------------------------------------------------------------------- a user of its own (as root)

# What a worker must not read when it is only another user: answers, and the project's history.
HIDDEN = ("solutions", "tests", "selftests", ".git", "drills", "benchmarks")


def _python_world_readable() -> bool:
    """Whether a user who is neither owner nor group can run this Python and torch (a pyenv under /root is not)."""
    for path in (os.__file__, _torch_file(), __file__):
        parts = os.path.realpath(path).split(os.sep)
        for i in range(1, len(parts) + 1):
            try:
                mode = os.stat(os.sep.join(parts[:i]) or os.sep).st_mode
            except OSError:
                return False
            if not mode & (stat.S_IXOTH if stat.S_ISDIR(mode) else stat.S_IROTH):
                return False
    return True


def _own_user(plan: Plan) -> None:
    uid = WORKER_UID_BASE + os.getpid()
    os.chown(plan.scratch, uid, uid)
    os.setgroups([plan.group] if plan.group is not None else [])  # the one group let through to its copy
    os.setgid(uid)
    os.setuid(uid)
    _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    os.chdir(plan.scratch)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class hidden_while_grading:
    """With the "users" protection: the project's folders that hold answers closed to other users meanwhile.

    Graders running at once as root on one checkout (two submissions graded side by side) share the closing: the
    first records the modes and closes, the last restores them (a count and the modes in a file beside the
    project's folders, under an flock).
    """

    def __init__(self, protection: str) -> None:
        self.paths = [ROOT / name for name in HIDDEN] + [STANDINS] if protection == USERS else []
        self.state = ROOT / ".drills-hidden.json"

    def _locked(self, change) -> None:
        import fcntl
        import json

        with open(ROOT / ".drills-hidden.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                state = json.loads(self.state.read_text()) if self.state.exists() else {"holders": [], "modes": {}}
            except (OSError, ValueError):
                state = {"holders": [], "modes": {}}
            state["holders"] = [pid for pid in state["holders"] if _alive(pid)]  # (a grader killed on the way)
            change(state)
            if state["holders"]:
                self.state.write_text(json.dumps(state))
            else:
                self.state.unlink(missing_ok=True)

    def __enter__(self) -> "hidden_while_grading":
        if not self.paths:
            return self

        def close(state: dict) -> None:
            if not state["holders"] and not state["modes"]:
                state["modes"] = {str(p): p.stat().st_mode for p in self.paths if p.is_dir()}
            state["holders"].append(os.getpid())
            for path, mode in state["modes"].items():
                Path(path).chmod(mode & 0o700)

        self._locked(close)
        return self

    def __exit__(self, *exc) -> None:
        if not self.paths:
            return

        def reopen(state: dict) -> None:
            if os.getpid() in state["holders"]:
                state["holders"].remove(os.getpid())
            if not state["holders"]:
                for path, mode in state["modes"].items():
                    Path(path).chmod(mode)
                state["modes"] = {}

        self._locked(reopen)


# --------------------------------------------------------------------------- the environment


def _environment_block() -> tuple[int, int] | None:
    """Where the environment strings this process started with lie (what /proc/self/environ shows)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[48]), int(fields[49])  # env_start, env_end (fields 50 and 51 of proc(5))
    except (OSError, ValueError, IndexError):
        return None


def _scrub_environment(plan: Plan, block: tuple[int, int] | None) -> None:
    """Nothing of the grader's environment: a few plain variables, and the original block zeroed."""
    scratch = "/tmp" if plan.protection == NAMESPACES else plan.scratch or ("/tmp" if os.name != "nt" else
                                                                                tempfile.gettempdir())
    # (Windows, spawned workers only: its DLLs are found through PATH, much of it needs SYSTEMROOT, and its
    # temporary folder is TEMP's, not TMPDIR's)
    windows = ("PATH", "SYSTEMROOT") if os.name == "nt" else ()
    keep = {k: os.environ[k] for k in ("LANG", "LC_ALL", "LC_MESSAGES", *windows) if k in os.environ}
    os.environ.clear()
    os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": scratch, "TMPDIR": scratch,
                       **({"TEMP": scratch, "TMP": scratch, "USERPROFILE": scratch} if os.name == "nt" else {}),
                       "PYTHONDONTWRITEBYTECODE": "1", **keep})
    if block is not None and 0 < block[0] < block[1]:
        ctypes.memset(block[0], 0, block[1] - block[0])
