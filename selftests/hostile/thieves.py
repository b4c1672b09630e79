"""Thieves: the untouched stubs, with every contract name taken from somewhere it must not be reachable.

Each thief appends to every exercise file a `_steal(name)` that tries one
route to a working implementation (the stand-ins by name, any loaded module or
object, sibling files, the reference on disk, git, the callers' frames), and
rebinds every contract name of the file to what it finds. Where the route is
closed the name still raises NotImplementedError, so a thief that steals
nothing scores what the stubs score: 0 in every component.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from grader.contract import MODULES, OWNERS
from selftests.bugs import ROOT

EXERCISES = ROOT / "exercises"
# ROUTES and PRELUDE are code the thief runs; {files} and {modules} in them become the contract's files
CONTRACT = {"files": repr(tuple(f"{m}.py" for m in MODULES)), "modules": repr(tuple(MODULES))}

ROUTES: dict[str, str] = {
    # the trusted stand-ins, by name
    "import_standins": """
    import importlib
    from grader.sandbox import standins
    piece = standins.TOOLS.get(name, (standins.PIECES.get(name),))[0]
    return getattr(importlib.import_module("grader.sandbox.standins." + piece), name.rpartition(".")[2])
""",
    # anything already in memory: every module, then every object the garbage collector knows
    "memory": """
    import gc, sys
    short = name.rpartition(".")[2]
    holders = ("_trusted_", "standins", "solutions", "alternatives", "checklib", "test_")
    for module in list(sys.modules.values()):
        if any(h in getattr(module, "__name__", "") for h in holders):
            found = _find(module, name)
            if found is not None:
                return found
    for obj in gc.get_objects():
        if getattr(obj, "__name__", None) == short and any(h in str(getattr(obj, "__module__", "")) for h in holders):
            return obj
""",
    # the sibling files, as the loader answers relative imports
    "siblings": """
    import importlib
    for sibling in {modules}:
        found = _find(importlib.import_module("." + sibling, __package__), name)
        if found is not None:
            return found
""",
    # the reference solutions and the selftests' correct alternatives on disk
    "files": """
    import os
    for folder in (os.path.join(_ROOT, "solutions"), os.path.join(_ROOT, "selftests", "alternatives", "loop_heads")):
        found = _from_files(folder, name)
        if found is not None:
            return found
""",
    # any other copy of the exercise files on the machine: other students' submissions, drills, releases
    "search_disk": """
    import os
    here = os.path.realpath(_HERE)
    for top in ("/tmp", "/work", "/home", "/root", "/srv", "/var/tmp", os.path.dirname(_ROOT)):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in (".venv", "site-packages", ".git", "node_modules")]
            if folder.count(os.sep) - top.count(os.sep) > 6 or os.path.realpath(folder) == here:
                continue
            for file in {files}:
                if file in files:
                    try:
                        found = _exec_source(open(os.path.join(folder, file)).read(), name)
                    except OSError:
                        continue
                    if found is not None and "NotImplementedError" not in open(os.path.join(folder, file)).read():
                        return found
""",
    # git's copy of the reference
    "git": """
    import subprocess
    for file in {files}:
        source = subprocess.run(["git", "-C", _ROOT, "show", "HEAD:solutions/" + file], capture_output=True,
                                text=True, timeout=5).stdout
        found = _exec_source(source, name)
        if found is not None:
            return found
""",
    # whoever called: the worker's frames, and the checks' if they were here
    "frames": """
    import sys
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for value in list(scope.values()):
                for holder in (value, getattr(value, "package", None)):
                    for piece in (getattr(holder, "pieces", None) or {}).values():
                        found = _find(piece, name)
                        if found is not None:
                            return found
                if getattr(value, "__name__", None) == name.rpartition(".")[2] and \\
                        getattr(value, "__module__", None) not in _MINE:
                    return value
        frame = frame.f_back
""",
}

MOMENTARY = frozenset({"memory", "frames"})  # routes whose answer depends on when they are called

PRELUDE = '''

# --- a thief (selftests/hostile/thieves.py): every name below comes from somewhere it must not
import os as _os
_HERE = _os.path.dirname(_os.path.abspath(__file__))
_MINE = {{f"{{__package__}}.{{m}}" for m in {modules}}}
_ROOT = {root!r}


def _find(scope, name):
    owner, _, short = name.rpartition(".")
    found = getattr(getattr(scope, owner, None), short, None) if owner else getattr(scope, name, None)
    if found is None and owner:
        found = getattr(scope, short, None)
    return found if found is not None and getattr(found, "__module__", None) not in _MINE else None


def _exec_source(source, name):
    scope = {{"__name__": "_stolen", "__package__": None}}
    source = source.replace("from .", "from _nowhere.")
    try:
        exec(compile(source, "<stolen>", "exec"), scope)
    except Exception:
        pass
    owner, _, short = name.rpartition(".")
    return getattr(scope.get(owner), short, None) if owner else scope.get(name)


def _from_files(folder, name):
    # `name` from the contract's files in `folder`, each run apart
    for file in [m + ".py" for m in {modules}]:
        try:
            source = open(_os.path.join(folder, file)).read()
        except OSError:
            continue
        found = _exec_source(source, name)
        if found is not None:
            return found


def _route(name):
{route}


# name -> what the route found (None: nothing) in this process: a search of files per name, not per call; a
# route that looks at the moment (memory, the callers' frames) tries again every call
_tried = {{}}
_ONCE = {once}


def _steal(name):
    if name not in _tried or not _ONCE:
        try:
            _tried[name] = _route(name)
        except Exception:
            _tried[name] = None
    if _tried[name] is None:
        raise NotImplementedError("nothing to steal: " + name)
    return _tried[name]


def _stolen_function(name):
    def function(*args, **kwargs):
        return _steal(name)(*args, **kwargs)
    return function


def _stolen_class(name):
    class Stolen:
        def __new__(cls, *args, **kwargs):
            return _steal(name)(*args, **kwargs)
    return Stolen
'''


def materialize(route: str, dest: Path) -> Path:
    """The stubs, each file ending with the thief for `route` (one of ROUTES); returns `dest`."""
    return materialize_code(ROUTES[route], dest, once=route not in MOMENTARY)


def materialize_code(route: str, dest: Path, base: Path = EXERCISES, once: bool = True) -> Path:
    """`base` (the stubs), each file ending with a thief whose `_route(name)` has the body `route`, trying once
    per name in a process where `once`; returns `dest`."""
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("__pycache__"))
    for module, names in OWNERS.items():
        code = route.replace("{files}", CONTRACT["files"]).replace("{modules}", CONTRACT["modules"])
        lines = [PRELUDE.format(root=str(ROOT), route=code.rstrip(), modules=CONTRACT["modules"], once=once)]
        for name in names:
            owner, _, method = name.partition(".")
            if method:
                lines.append(f"{owner}.{method} = lambda self, *a, **k: _steal({name!r})(self, *a, **k)\n")
            elif name[0].isupper():
                lines.append(f"{name} = _stolen_class({name!r})\n")
            else:
                lines.append(f"{name} = _stolen_function({name!r})\n")
        path = dest / f"{module}.py"
        path.write_text(path.read_text() + "".join(lines))
    return dest
