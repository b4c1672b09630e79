"""The from-scratch rule, enforced while student code runs (worker side).

`grader/engine/scratch.py` reads the source with `ast` and names a forbidden call where it is written plainly.
Code can reach the same function in ways that no reading follows (a module-level helper, `getattr` with a built
string, `torch.__dict__[...]`, `importlib.import_module`, `__import__`, a base class returned by a helper), so
a worker grading component C also puts a guard in the place of each callable that course.yml forbids for C,
for as long as C's code runs there: a function is replaced in its namespace (so every way of looking it up
finds the guard), a class gets a guarded `__init__` (so an instance, of it or of a subclass, cannot be made
without one). A guard called on behalf of student code raises `ForbiddenCall` (the check fails, and the rule's
gate in grader/engine/scoring.py takes the component's points); called on behalf of a trusted stand-in it
passes the call on.

On whose behalf: the stack is walked outward from the guard. A frame of a stand-in (its code object and its
globals, by identity) decides "trusted"; a frame of any other code than the Python installation's and the
grader's own (the submission's files, code compiled from a string) decides "student"; so does reaching the
bottom of the stack without either (a contract name bound to the library's class itself). A class's guard
also refuses an instance whose class, or any class between it and the forbidden one, is not a stand-in's (a
subclass of the library's class in a submission, wherever its base came from).

A C function has no namespace of its own to replace it in (`torch._C._VariableFunctions.layer_norm`,
`torch._C.TensorBase.softmax` are attributes of immutable types), nor has an aten operator
(`torch.ops.aten.layer_norm`); but torch hands every call of one to the function modes in force before it
runs, so the guard is also such a mode (`_Watch`) while C's code runs: it knows the library's objects by
identity, and C functions and operators named after a forbidden one (`aten._softmax`, sdpa's kernels).

Not a wall: code that digs the original out of a guard (its closure, the garbage collector), turns torch's
function modes off around its call (`torch._C.DisableTorchFunction`) while reaching the C function, calls a
kernel under an unrelated name (`torch._fused_adamw_`), or compiles its code under the name of a file of the
installation is not stopped here. Worker side: imports nothing of the grader's.
"""
from __future__ import annotations

import importlib
import os
import sys
import sysconfig
import types
from typing import Any, Callable, Iterable

import torch
import torch.overrides

from .protocol import FORBIDDEN_CALL_CLASS


class ForbiddenCall(Exception):
    """Student code called a library function that the from-scratch rule forbids for the graded component."""


ForbiddenCall.__name__ = ForbiddenCall.__qualname__ = FORBIDDEN_CALL_CLASS  # scoring.py's gate reads it


def _installed_roots() -> tuple[str, ...]:
    """Folders whose code is neither a stand-in nor the student's: the Python installation and the grader."""
    roots = {sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # grader/
    roots.add(os.path.dirname(os.path.dirname(os.path.abspath(importlib.import_module("torch").__file__))))
    folders = tuple(os.path.join(os.path.realpath(r), "") for r in roots) + tuple(os.path.join(r, "") for r in roots)
    return folders + ("<frozen ",)  # the import system's own frames (a module of the submission being imported)


_ROOTS = _installed_roots()


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


def _resolve(dotted: str) -> tuple[Any, str, Any] | None:
    """(the namespace that holds it, its attribute name, the object) for a dotted name; None where there is none."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:  # noqa: BLE001 - not a module (or one this torch does not have)
            continue
        parent, attr = None, parts[cut - 1]
        for part in parts[cut:]:
            parent, attr = obj, part
            obj = getattr(obj, part, None)
            if obj is None:
                return None
        if parent is None:  # a module itself: the guard goes on each of its names
            return (obj, "", obj)
        return parent, attr, obj
    return None


def _compiled(func: Any) -> bool:
    """A function of torch's C core or an aten operator (what no namespace holds alone)."""
    return isinstance(func, (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType,
                             torch._ops.OpOverloadPacket, torch._ops.OpOverload))


class _Watch(torch.overrides.TorchFunctionMode):
    """Sees every call of a torch function, by whatever name it was reached: C functions have no namespace to
    replace them in (`torch._C._VariableFunctions`, `torch._C.TensorBase` are immutable), but torch hands each
    call to the function modes in force before it runs."""

    def __init__(self, guard: "Guard") -> None:
        super().__init__()
        self.guard = guard

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = self.guard.forbidden_function(func)
        if name is not None:
            self.guard.check_call(name, depth=1)
        return func(*args, **(kwargs or {}))


class Guard:
    """The forbidden callables of one component, guarded while its code runs in this process."""

    def __init__(self, component: str, forbidden: Iterable[str], pieces: dict[str, types.ModuleType],
                 codes: Iterable[types.CodeType] = ()) -> None:
        self.component = component
        self.forbidden = tuple(forbidden)
        self.trusted_codes = {id(c) for code in codes for c in _codes(code)}  # by identity (they stay alive)
        self.trusted_globals = {id(m.__dict__) for m in pieces.values()}
        self.trusted_classes = {v for m in pieces.values() for v in vars(m).values()
                                if isinstance(v, type) and v.__module__ == m.__name__}
        self.violations: list[str] = []
        self._undo: list[Callable[[], None]] = []
        self._guarded: set[object] = set()  # classes by id, functions by (namespace id, name)
        # id of a function torch handed the mode -> the forbidden name it is, or None (each decided once)
        self._functions: dict[int, str | None] = {}
        self._ops: dict[str, str] = {}  # the name of the aten operator behind it -> its name

    # --- installing -----------------------------------------------------------------------
    def install(self) -> "Guard":
        for name in self.forbidden:
            found = _resolve(name)
            if found is None:
                continue
            parent, attr, obj = found
            if isinstance(obj, types.ModuleType):  # a forbidden module: each function and class defined there
                for key, value in list(vars(obj).items()):
                    if not key.startswith("__") and getattr(value, "__module__", None) == obj.__name__:
                        self._guard(obj, key, value, f"{name}.{key}")
            else:
                self._guard(parent, attr, obj, name)
        if self._ops:
            watch = _Watch(self)
            watch.__enter__()
            self._undo.insert(0, lambda: watch.__exit__(None, None, None))
        return self

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def forbidden_function(self, func: Any) -> str | None:
        """The forbidden name that `func` (as torch hands it to a function mode) is, else None: the library's
        object itself under any name (`torch._C._VariableFunctions.layer_norm`, `torch._C.TensorBase.softmax`),
        or a C function or aten operator named after one (`torch._C._nn.cross_entropy_loss`,
        `torch.ops.aten._softmax.default`, `aten._scaled_dot_product_flash_attention_for_cpu`)."""
        key = id(func)
        if key not in self._functions:
            self._functions[key] = self._named_after(func) if _compiled(func) else None
        return self._functions[key]

    def _named_after(self, func: Any) -> str | None:
        base = getattr(func, "__name__", "").partition(".")[0].lstrip("_")
        for op, forbidden in self._ops.items():
            family = op.rpartition("_")[0] if op.count("_") >= 2 else op  # scaled_dot_product_*: sdpa's kernels
            if base == op or base.startswith(op + "_") or base.startswith(family + "_"):
                return forbidden
        return None

    def _guard(self, parent: Any, attr: str, obj: Any, name: str) -> None:
        if isinstance(obj, type):
            if id(obj) in self._guarded:
                return
            self._guarded.add(id(obj))
            original = vars(obj).get("__init__")
            inherited = obj.__init__
            guard = self

            def __init__(self, *args, **kwargs):  # noqa: N807 - it is the class's
                guard.check_instance(name, obj, self)
                return inherited(self, *args, **kwargs)

            __init__.__qualname__ = f"{obj.__qualname__}.__init__"
            type.__setattr__(obj, "__init__", __init__)
            self._undo.append(lambda: type.__setattr__(obj, "__init__", original) if original is not None
                              else type.__delattr__(obj, "__init__"))
            return
        if not callable(obj) or (id(parent), attr) in self._guarded:
            return
        self._guarded.add((id(parent), attr))
        self._functions[id(obj)] = name
        self._ops.setdefault(getattr(obj, "__name__", attr).lstrip("_"), name)
        own = attr in vars(parent)
        current = vars(parent)[attr] if own else None
        guard = self

        def guarded(*args, **kwargs):
            guard.check_call(name)
            return obj(*args, **kwargs)

        guarded.__name__ = getattr(obj, "__name__", attr)
        guarded.__qualname__ = getattr(obj, "__qualname__", attr)
        guarded.__doc__ = getattr(obj, "__doc__", None)
        setattr(parent, attr, guarded)
        self._undo.append(lambda: setattr(parent, attr, current) if own else delattr(parent, attr))

    # --- deciding -------------------------------------------------------------------------
    def check_instance(self, name: str, cls: type, instance: Any) -> None:
        mro = type(instance).__mro__
        between = mro[:mro.index(cls)] if cls in mro else ()
        untrusted = next((c for c in between if c not in self.trusted_classes), None)
        if untrusted is not None:
            self._refuse(name, f"your class {untrusted.__qualname__} is built on it")
        if not between:  # the library's class itself: on whose behalf is it made?
            self.check_call(name, depth=3)

    def check_call(self, name: str, depth: int = 2) -> None:
        frame = sys._getframe(depth)
        while frame is not None:
            code = frame.f_code
            if id(code) in self.trusted_codes and id(frame.f_globals) in self.trusted_globals:
                return
            filename = code.co_filename
            if not filename.startswith(_ROOTS):
                where = f"{os.path.basename(filename)}:{frame.f_lineno} in {code.co_name}"
                self._refuse(name, f"reached from {where}")
            frame = frame.f_back
        self._refuse(name, "your contract name is the library's own")

    def _refuse(self, name: str, how: str) -> None:
        text = (f"{name} is forbidden in {self.component}: the exercise is to write it yourself "
                f"(the from-scratch rule, course.yml; {how})")
        self.violations.append(text)
        raise ForbiddenCall(text)
