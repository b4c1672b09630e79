"""What student code may change in a worker's process beyond its own modules, for a worker that components share.

A worker that serves several components (grader/engine/planning.py's
SHARED_WORKERS) gives each its own fresh import of the files; what else one
component's code changed must not reach the next one's checks. `ProcessState`
is taken before any student code runs; `restore()` puts back what can be put
back (torch's global settings and random state, names rebound in torch,
builtins and math, sys.path and the import hooks, the modules in sys.modules,
the environment, the working folder, signal handlers) and says whether the process is as it was: a thread or
a child process left running, or a limit lowered, cannot be undone, and the
next component then gets a fresh worker. Worker side: imports nothing of the
grader's.
"""
from __future__ import annotations

import builtins
import importlib.machinery
import math
import os
import signal
import sys
import threading
import warnings

import torch
import torch.nn.functional as F

try:
    import resource
except ImportError:  # Windows: no rlimits to put back
    resource = None  # type: ignore[assignment]

# Namespaces whose names student code might rebind (`torch.softmax = ...`): their entries are put back.
_NAMESPACES = (torch, torch.nn, F, torch.Tensor, torch.nn.Module, builtins, math)
_LIMITS = () if resource is None else (resource.RLIMIT_AS, resource.RLIMIT_NOFILE, resource.RLIMIT_NPROC,
                                        resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_STACK,
                                        resource.RLIMIT_CORE)
_SIGNALS = tuple(s for s in signal.Signals if s.name.startswith("SIG") and s.name not in ("SIGKILL", "SIGSTOP"))


def _default_device() -> torch.device:
    get = getattr(torch, "get_default_device", None)  # torch 2.3 and later
    return get() if get is not None else torch.empty(0).device


class ProcessState:
    """The process-wide state of a worker, as it was when taken (see the module docstring)."""

    def __init__(self) -> None:
        self.dtype = torch.get_default_dtype()
        self.device = _default_device()
        self.grad = torch.is_grad_enabled()
        self.threads = torch.get_num_threads()
        self.deterministic = (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())
        self.anomaly = torch.is_anomaly_enabled()
        self.rng = torch.get_rng_state()
        self.names = [(space, dict(vars(space))) for space in _NAMESPACES]
        self.path, self.meta_path, self.path_hooks = list(sys.path), list(sys.meta_path), list(sys.path_hooks)
        self.modules = dict(sys.modules)
        self.libraries = _library_folders(self.path, self.modules)
        self.environ = dict(os.environ)
        self.cwd = os.getcwd()
        self.handlers = {s: signal.getsignal(s) for s in _SIGNALS}
        self.limits = {r: resource.getrlimit(r) for r in _LIMITS}
        self.streams = (sys.stdout, sys.stderr, sys.stdin)
        self.recursion = sys.getrecursionlimit()
        self.filters = list(warnings.filters)
        self.tasks = _tasks()  # (a spawned worker has a thread of torch's own from its import: spawner.py)

    def restore(self) -> bool:
        """Put back what student code changed; False where something cannot be put back."""
        # each only where it changed: setting the default device, even to itself, costs torch 0.6 s of imports
        if torch.get_default_dtype() != self.dtype:
            torch.set_default_dtype(self.dtype)
        if _default_device() != self.device:
            torch.set_default_device(self.device)
        if torch.is_grad_enabled() != self.grad:
            torch.set_grad_enabled(self.grad)
        if torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        if (torch.are_deterministic_algorithms_enabled(),
                torch.is_deterministic_algorithms_warn_only_enabled()) != self.deterministic:
            torch.use_deterministic_algorithms(self.deterministic[0], warn_only=self.deterministic[1])
        if torch.is_anomaly_enabled() != self.anomaly:
            torch.autograd.set_detect_anomaly(self.anomaly)
        torch.set_rng_state(self.rng)
        for space, names in self.names:
            now = vars(space)
            for name, value in names.items():
                if now.get(name, _MISSING) is not value:
                    setattr(space, name, value)
        sys.path[:], sys.meta_path[:], sys.path_hooks[:] = self.path, self.meta_path, self.path_hooks
        self._restore_modules()
        sys.path_importer_cache.clear()
        os.environ.clear()
        os.environ.update(self.environ)
        os.chdir(self.cwd)
        for s, handler in self.handlers.items():
            if signal.getsignal(s) is not handler and handler is not None:
                signal.signal(s, handler)
        sys.stdout, sys.stderr, sys.stdin = self.streams
        sys.setrecursionlimit(self.recursion)
        sys.settrace(None)
        sys.setprofile(None)
        warnings.filters[:] = self.filters
        return self.limits == {r: resource.getrlimit(r) for r in _LIMITS} and _alone(self.tasks)


    def _restore_modules(self) -> None:
        """sys.modules as it was: an entry replaced is put back (a fake `math`, a `torch.nn.functional` of the
        student's), one added is dropped unless the import system loaded it from the libraries' own folders
        (torch imports parts of itself on first use, which must not be imported twice)."""
        for name, module in self.modules.items():
            if sys.modules.get(name, _MISSING) is not module:
                sys.modules[name] = module
        for name in [n for n in sys.modules if n not in self.modules]:
            if not _a_library_module(name, sys.modules[name], self.libraries):
                del sys.modules[name]


_MISSING = object()
_LOADERS = (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader,
            importlib.machinery.ExtensionFileLoader)


def _library_folders(path: list[str], modules: dict[str, object]) -> tuple[str, ...]:
    """The folders of the import path that the modules imported so far came from (the standard library,
    site-packages), as prefixes: never the scratch folder or the submission, from which nothing was imported
    before student code ran."""
    origins = [getattr(getattr(m, "__spec__", None), "origin", None) for n, m in modules.items() if "." not in n]
    origins = [o for o in origins if isinstance(o, str) and os.path.isabs(o)]
    folders = []
    for entry in path:
        if entry and os.path.isabs(entry):
            prefix = os.path.join(os.path.normpath(entry), "")
            if any(o.startswith(prefix) for o in origins):
                folders.append(prefix)
    return tuple(folders)


def _a_library_module(name: str, module: object, libraries: tuple[str, ...]) -> bool:
    """Whether `module` is what importing `name` loads: a plain module, loaded by a file loader from a file under
    the libraries' folders (built-in and frozen ones too); a module object made or loaded any other way is not."""
    if not isinstance(module, type(sys)):  # (torch's config modules are of a subclass)
        return False
    spec = getattr(module, "__spec__", None)
    if not isinstance(spec, importlib.machinery.ModuleSpec) or spec.name != name:
        return False
    if spec.origin in ("built-in", "frozen"):
        return isinstance(spec.loader, type) and spec.loader in (importlib.machinery.BuiltinImporter,
                                                                 importlib.machinery.FrozenImporter)
    if not isinstance(spec.loader, _LOADERS) or not isinstance(spec.origin, str):
        return False
    return spec.loader.path == spec.origin and os.path.normpath(spec.origin).startswith(libraries)


def _tasks() -> frozenset[str] | None:
    """The threads of this process, Python's or not, by id (None where there is no /proc)."""
    try:
        return frozenset(os.listdir("/proc/self/task"))
    except OSError:
        return None


def _alone(tasks: frozenset[str] | None) -> bool:
    """No thread but this one and those that were there before (`tasks`), and no child process still running."""
    if threading.active_count() > 1:
        return False
    now = _tasks()
    if now is not None and not now <= (tasks or frozenset()) | {str(threading.get_native_id())}:
        return False  # threads started outside Python's threading too
    while hasattr(os, "WNOHANG"):  # (Windows: a child left running is not seen here)
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:  # a child still running
            return False
    return True
