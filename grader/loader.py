"""Load an implementation folder (exercises, solutions, a submission) as a package.

Each load gets a fresh, uniquely named package so loads never share state. With
`isolate_for=COMPONENT`, everything that belongs to another component is swapped
for the trusted stand-ins in `grader.standins`: whole files that hold none of the
component's code, and single functions or methods inside files that do.
"""
from __future__ import annotations

import importlib
import itertools
import sys
import types
from pathlib import Path

from . import standins
from .contract import MODULES, OWNERS, module_components

_counter = itertools.count()


class ImplementationLoadError(Exception):
    """A file of the implementation is missing or cannot be imported."""


class Package:
    """A lazily imported implementation; `module("attention")` imports attention.py."""

    def __init__(self, folder: str | Path, isolate_for: str | None = None,
                 broken: dict[str, str] | None = None) -> None:
        self.folder = Path(folder).resolve()
        self.broken = broken or {}  # file -> why it cannot be loaded (found out before)
        if not self.folder.is_dir():
            raise ImplementationLoadError(f"no such folder: {self.folder}")
        # Without the full stand-ins (a student release), components are graded in context.
        self.isolate_for = isolate_for if getattr(standins, "COMPLETE", True) else None
        self.name = f"_drills_impl_{next(_counter)}"
        package = types.ModuleType(self.name)
        package.__path__ = [str(self.folder)]
        package.__package__ = self.name
        sys.modules[self.name] = package
        if self.isolate_for is not None:
            for module in MODULES:
                if self.isolate_for not in module_components(module):
                    sys.modules[f"{self.name}.{module}"] = standins
        self._modules: dict[str, types.ModuleType] = {}
        self._patched: set[str] = set()

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
        if sys.modules.get(full) is standins:
            return standins
        if f"{name}.py" in self.broken:
            raise ImplementationLoadError(self.broken[f"{name}.py"])
        if not (self.folder / f"{name}.py").is_file():
            raise ImplementationLoadError(f"{name}.py is missing from {self.folder}")
        try:
            module = importlib.import_module(full)
        except Exception as exc:  # the student's file failed to import
            sys.modules.pop(full, None)
            raise ImplementationLoadError(f"{name}.py failed to import: {type(exc).__name__}: {exc}") from exc
        self._patch_imported()
        return module

    def _patch_imported(self) -> None:
        """Patch every student file imported so far, including those pulled in by sibling imports."""
        if self.isolate_for is None:
            return
        for name in MODULES:
            module = sys.modules.get(f"{self.name}.{name}")
            if module is None or module is standins or name in self._patched:
                continue
            _patch_foreign_names(module, name, self.isolate_for)
            self._patched.add(name)

    def close(self) -> None:
        for key in [k for k in sys.modules if k == self.name or k.startswith(self.name + ".")]:
            del sys.modules[key]


def _patch_foreign_names(module: types.ModuleType, module_name: str, component: str) -> None:
    """Swap in trusted versions of the names in `module` that other components own."""
    for qualname, owners in OWNERS[module_name].items():
        if component in owners:
            continue
        owner_name, _, method = qualname.partition(".")
        if not method:
            setattr(module, qualname, getattr(standins, qualname))
            continue
        cls = getattr(module, owner_name, None)
        if cls is None:
            continue
        if method == "__init__":
            cls.__init__ = standins.trusted_mha_init(cls.__init__)
        else:
            setattr(cls, method, getattr(getattr(standins, owner_name), method))
