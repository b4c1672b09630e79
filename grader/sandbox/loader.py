"""Load an implementation folder (exercises, solutions, a submission) as a package.

Each load gets a fresh, uniquely named package so loads never share state. With
`isolate_for=COMPONENT`, everything that belongs to another component is swapped
for a trusted stand-in (`grader/sandbox/standins/`): whole files that hold none of the
component's code, and single functions or methods inside files that do. Only
the stand-ins of names the component does not own are ever loaded here, each
executed afresh for this package (see grader/sandbox/standins/__init__.py).

In a worker that `isolate_for` shares with other components (`mates`), their
stand-ins are not loaded either: their names are guarded instead, and code that
reaches one raises CrossedOver, so that the grader grades the component again
in a worker of its own (grader/engine/checks.py).
"""
from __future__ import annotations

import importlib
import importlib.util
import itertools
import sys
import types
from pathlib import Path

import torch.nn as nn

from . import standins
from .protocol import CrossedOver
from ..contract import MODULES, OWNERS
from ..text import Phrase

_counter = itertools.count()


class ImplementationLoadError(Exception):
    """A file of the implementation is missing or cannot be imported."""


class _Modules:
    """`impl` as the stand-ins see it: `impl.attention` is the package's attention module, as patched."""

    def __init__(self, package: "Package") -> None:
        self._package = package

    def __getattr__(self, name: str) -> types.ModuleType:
        if name.startswith("_"):
            raise AttributeError(name)
        return self._package.module(name)


class Package:
    """A lazily imported implementation; `module("attention")` imports attention.py.

    `code` holds the compiled stand-in pieces this package may use (from
    `standins.read`); by default they are read now for `isolate_for`.
    """

    def __init__(self, folder: str | Path, isolate_for: str | None = None,
                 broken: dict[str, str] | None = None, code: dict[str, object] | None = None,
                 mates: frozenset[str] = frozenset()) -> None:
        self.folder = Path(folder).resolve()
        self.broken = broken or {}  # file -> why it cannot be loaded (found out before)
        if not self.folder.is_dir():
            raise ImplementationLoadError(Phrase("no such folder: {path}", path=str(self.folder)))
        self.isolate_for = isolate_for
        self.mates = mates - {isolate_for}
        self.crossed: str | None = None  # the first of the mates' names that code here reached
        if code is None:
            code = standins.read(standins.available_for(isolate_for, mates=self.mates))
        self.name = f"_drills_impl_{next(_counter)}"
        package = types.ModuleType(self.name)
        package.__path__ = [str(self.folder)]
        package.__package__ = self.name
        sys.modules[self.name] = package
        self.codes = tuple(code.values())  # the stand-ins' compiled code: their frames are trusted (forbid.py)
        self.pieces = self._instantiate(code)
        self._own: dict[str, types.ModuleType] = {}  # student files replaced whole, imported for their own names
        self._modules: dict[str, types.ModuleType] = {}
        self._patched: set[str] = set()
        for module in MODULES:
            if self._replaced_whole(module):
                sys.modules[f"{self.name}.{module}"] = self._assemble(module)

    # --- stand-ins --------------------------------------------------------------------------
    def _instantiate(self, code: dict[str, object]) -> dict[str, types.ModuleType]:
        pieces = {}
        for piece, compiled in code.items():
            module = types.ModuleType(f"{self.name}._trusted_{piece}")
            module.__dict__["impl"] = _Modules(self)
            exec(compiled, module.__dict__)  # noqa: S102 - grader code, read from grader/sandbox/standins/
            module.impl = _Modules(self)  # the piece's own `impl = None` placeholder is overwritten
            pieces[piece] = module
        return pieces

    def trusted(self, name: str):
        """The stand-in of a contract name or grader tool, or None where it is not loaded here."""
        piece = standins.TOOLS[name][0] if name in standins.TOOLS else standins.PIECES.get(name)
        module = self.pieces.get(piece)
        return None if module is None else getattr(module, name.rpartition(".")[2])

    def _replaced_whole(self, module: str) -> bool:
        """A file is replaced whole when the component owns none of it and every piece of it is loaded (or
        guarded: a mate's), so that a sibling's `from .attention import split_heads` gets what stands in."""
        if self.isolate_for is None:
            return False
        names = OWNERS[module]
        return (all(self.isolate_for not in owners for owners in names.values())
                and all(self._standing_in(name) is not None for name in names))

    def _standing_in(self, name: str):
        """What takes the place of another component's contract name: its stand-in, or a guard where it is a
        mate's; None where neither is loaded (a student release's missing piece: the student's own then)."""
        trusted = self.trusted(name)
        if trusted is None and standins.owners(name) & self.mates:
            return self._guard(name)
        return trusted

    def _assemble(self, module: str) -> types.ModuleType:
        """A module with the contract's names of `module`, all stand-ins (classes built from their methods)."""
        assembled = types.ModuleType(f"{self.name}.{module}")
        methods: dict[str, dict[str, object]] = {}
        for name in OWNERS[module]:
            owner, _, method = name.partition(".")
            if method:
                methods.setdefault(owner, {})[method] = self._standing_in(name)
            else:
                setattr(assembled, name, self._standing_in(name))
        for owner, body in methods.items():
            setattr(assembled, owner, type(owner, (nn.Module,), {**body, "__module__": assembled.__name__}))
        assembled.__getattr__ = lambda name: self._own_name(module, name)  # PEP 562: names beyond the contract
        return assembled

    def _own_name(self, module: str, name: str):
        """A name of the student's own file beyond the contract (a private helper a sibling imports).

        The file is imported on the side, with every contract name in it patched
        as usual, only when such a name is asked for.
        """
        if name.startswith("__") or name in OWNERS[module]:
            raise AttributeError(name)
        own = self._own.get(module)
        if own is None:
            path = self.folder / f"{module}.py"
            if f"{module}.py" in self.broken or not path.is_file():
                raise AttributeError(f"{module}.py has no {name!r} (the file is missing or does not load)")
            spec = importlib.util.spec_from_file_location(f"{self.name}._own_{module}", path)
            own = importlib.util.module_from_spec(spec)
            own.__package__ = self.name
            try:
                spec.loader.exec_module(own)
            except Exception as exc:  # noqa: BLE001 - the student's file failed to import
                raise ImportError(f"{module}.py failed to import: {type(exc).__name__}: {exc}") from exc
            self._patch_foreign_names(own, module)
            self._own[module] = own
        try:
            return getattr(own, name)
        except AttributeError:
            raise AttributeError(f"{module}.py has no {name!r}") from None

    # --- the implementation ---------------------------------------------------------------
    def module(self, name: str) -> types.ModuleType:
        if name not in self._modules:
            self._modules[name] = self._import(name)
        return self._modules[name]

    def resolve(self, qualname: str):
        """'attention.split_heads' or 'block.TransformerBlock' -> the object."""
        module, _, attr = qualname.partition(".")
        obj = self.module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj

    def _import(self, name: str) -> types.ModuleType:
        if name not in MODULES:
            raise ImplementationLoadError(f"{name}.py is not part of the contract")
        full = f"{self.name}.{name}"
        if self._replaced_whole(name):
            return sys.modules[full]
        if f"{name}.py" in self.broken:
            raise ImplementationLoadError(self.broken[f"{name}.py"])
        if not (self.folder / f"{name}.py").is_file():
            # not the folder's path: graded, it is a private copy's, which the student never saw
            raise ImplementationLoadError(Phrase("{file} is missing from the submission", file=name + ".py"))
        try:
            module = importlib.import_module(full)
        except Exception as exc:  # the student's file failed to import
            sys.modules.pop(full, None)
            why = str(exc).replace(f"{self.name}.", "")  # the student knows their modules by their own names
            error = f"{type(exc).__name__}: {why}"
            raise ImplementationLoadError(Phrase("{file} failed to import: {error}", file=name + ".py",
                                                 error=error)) from exc
        self._patch_imported()
        return module

    def _patch_imported(self) -> None:
        """Patch every student file imported so far, including those pulled in by sibling imports."""
        if self.isolate_for is None:
            return
        for name in MODULES:
            module = sys.modules.get(f"{self.name}.{name}")
            if module is None or self._replaced_whole(name) or name in self._patched:
                continue
            self._patch_foreign_names(module, name)
            self._patched.add(name)

    def _patch_foreign_names(self, module: types.ModuleType, module_name: str) -> None:
        """Swap in the stand-ins of the names in `module` that other components own (where loaded)."""
        for qualname, owners in OWNERS[module_name].items():
            if self.isolate_for in owners:
                continue
            trusted = self._standing_in(qualname)
            if trusted is None:
                continue
            owner_name, _, method = qualname.partition(".")
            if not method:
                setattr(module, qualname, trusted)
                continue
            cls = getattr(module, owner_name, None)
            if not isinstance(cls, type):
                continue
            if method == "__init__" and standins.PIECES[qualname] in self.pieces:
                cls.__init__ = self.pieces[standins.PIECES[qualname]].wrap_init(cls.__init__)
            else:
                setattr(cls, method, trusted)

    def _guard(self, qualname: str):
        """What stands in for a worker-mate's name: it only says that code here reached it."""
        def guarded(*args, **kwargs):
            self._cross(qualname)

        guarded.__name__ = guarded.__qualname__ = qualname.rpartition(".")[2]
        return guarded

    def _cross(self, name: str) -> None:
        """Code here reached `name`, a worker-mate's: remember it (student code may swallow the exception)."""
        self.crossed = self.crossed or name
        raise CrossedOver(name)

    def new_trusted(self, name: str, args: tuple, kwargs: dict):
        """A grader stand-in or tool; where none is loaded (a student release), the implementation's own."""
        cls = self.trusted(name)
        if name in standins.TOOLS and cls is not None:  # a tool wraps the (trusted, else the student's) real thing
            wrapped = standins.TOOLS[name][1]
            inner = () if wrapped is None else (self.new_trusted(wrapped, (), {}),)
            return cls(*inner, *args, **kwargs)
        if cls is None and name in standins.PIECES and standins.owners(name) & self.mates:
            self._cross(name)
        if cls is None:
            if name in standins.TOOLS or self.isolate_for is not None and standins.shipped(standins.PIECES[name]):
                raise ImplementationLoadError(f"grader error: the trusted {name} is not available to these checks")
            cls = self.resolve(f"{standins.module_of(name)}.{name}")
        return cls(*args, **kwargs)

    def close(self) -> None:
        for key in [k for k in sys.modules if k == self.name or k.startswith(self.name + ".")]:
            del sys.modules[key]
