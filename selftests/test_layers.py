"""The grader's layout is its architecture: no import cycle, and no arrow from a lower layer to a higher one.

Layers, lowest first: the shared modules at the top of `grader/` (contract,
course, results, source, ...), `sandbox/` (the process boundary), `engine/`
(running and scoring the checks), then `channels/` (the ways a grade reaches
people: renderers, packagers, drivers), `drills/` and `train/` (a learner's own
practice), and `cli.py`, which only routes. Every import counts,
also those inside functions; the graph is read from the source (ast), nothing
is imported. The checks' library, `tests/checklib`, is held to the same: no cycle, and the general
mistakes below the comparisons and the components' mistakes.
"""
from __future__ import annotations

import ast
from pathlib import Path

GRADER = Path(__file__).resolve().parents[1] / "grader"
# A module may import its own layer and those below it, never those above.
LAYERS = {"shared": 0, "sandbox": 1, "engine": 2, "channels": 3, "drills": 3, "train": 3, "show": 3, "cli": 4}


def module_name(path: Path, root: Path = GRADER.parent) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    # grader/locale/*/stubs/ holds translated exercise stubs (grader/pristine.py), not grader modules
    return {module_name(p): p for p in GRADER.rglob("*.py") if "locale" not in p.relative_to(GRADER).parts}


def imports(name: str, path: Path, known: set[str], top: str = "grader") -> set[str]:
    """The modules of the package `top` (the grader's) that `name` imports (anywhere in its file)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            targets = [stem] + [f"{stem}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name and target.split(".")[0] == top:
                found.add(target)
    return found


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS:
        return parts[1]
    return "cli" if module in ("grader.cli", "grader.__main__") else "shared"


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, set(known)) - {"grader"} for name, path in known.items()}


def assert_no_cycle(edges: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges[node]):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt):] + [nxt]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)


def test_the_grader_has_no_import_cycle():
    assert_no_cycle(graph())


def test_no_layer_imports_a_higher_one():
    wrong = sorted(f"{a} ({layer(a)}) imports {b} ({layer(b)})"
                   for a, targets in graph().items() for b in targets
                   if a != "grader.__main__" and LAYERS[layer(b)] > LAYERS[layer(a)])
    assert not wrong, "\n".join(wrong)


# Within channels/ (grader/channels/__init__.py), by kind: the renderers import no other channel module, the
# packagers none but the renderers; the drivers (commands, watch, classroom, batch/, nbgrader/notebook) sit above.
# (The templates are files the packagers write, such as a notebook's setup cell, not grader code.)
CHANNEL_KINDS = {"render": {"render"}, "package": {"render", "package"}}


def test_the_channels_kinds_keep_apart():
    edges = graph()
    assert "grader.channels.render.formats" in edges["grader.channels.commands"]  # a guard on the test itself
    wrong = sorted(f"{a} imports {b}" for a, targets in edges.items() for b in targets
                   for kind, allowed in CHANNEL_KINDS.items()
                   if a.startswith(f"grader.channels.{kind}.") and ".templates." not in a
                   and b.startswith("grader.channels.") and b.split(".")[2] not in allowed)
    assert not wrong, "\n".join(wrong)


def test_the_worker_side_imports_nothing_of_the_graders_side():
    """As pytest-xdist's remote.py: the process that runs student code holds the codec, the protocol, the
    loader and the stand-ins, never the grader-side handle, the zygote's controller or the engine."""
    edges = graph()
    reached, todo = set(), ["grader.sandbox.worker"]
    while todo:
        node = todo.pop()
        if node not in reached:
            reached.add(node)
            todo += edges[node]
    assert not reached & {"grader.sandbox.handle", "grader.sandbox.zygote", "grader.sandbox.reaper"}, sorted(reached)
    assert all(layer(m) in ("shared", "sandbox") for m in reached), sorted(reached)


def test_the_graph_reads_the_real_imports():
    """A guard on the test itself: known arrows are found."""
    edges = graph()
    assert "grader.sandbox.zygote" in edges["grader.sandbox.handle"]
    assert "grader.engine.runner" in edges["grader.channels.commands"]
    assert "grader.contract" in edges["grader.sandbox.standins"]


def test_the_checks_meet_student_code_in_one_place():
    """tests/checklib/adapters.py names each entry point of the contract once; no check file names one itself."""
    import re

    from grader.contract import OWNERS

    checks = GRADER.parent / "tests"
    adapters = (checks / "checklib" / "adapters.py").read_text()
    named = set(re.findall(r'impl\.(?:fn|new)\("(\w+\.\w+)"', adapters))
    entries = {f"{module}.{name.split('.')[0]}" for module, names in OWNERS.items() for name in names}
    assert named == entries, f"adapters.py lacks {sorted(entries - named)}, has extra {sorted(named - entries)}"
    modules = "|".join(OWNERS)
    for path in sorted(checks.rglob("*.py")):
        if path.name != "adapters.py":
            found = re.findall(rf'\.(?:fn|new)\(\s*f?"(?:{modules})\.', path.read_text())
            assert not found, f"{path.relative_to(checks)} names an entry point itself; use checklib.adapters"


def test_checks_fail_through_one_comparison_library():
    """Every failure message is built by tests/checklib/compare.py (what, problem, diagnosis, hint), never by
    hand in a check file."""
    checks = GRADER.parent / "tests"
    for path in sorted(checks.rglob("*.py")):
        if path.name != "compare.py":
            assert "\\n  hint:" not in path.read_text(), f"{path.relative_to(checks)} builds a hint by hand; use fail()"


# The checks' library (tests/checklib) has layers too, lowest first: the catalogue of mistakes and the tolerance,
# the mistakes that are no one component's with their combinators (mistakes/general.py), the comparisons
# (compare.py, which weighs general's dtype and squeeze entries), then each component's mistakes.
CHECKLIB = GRADER.parent / "tests" / "checklib"


def checklib_graph() -> dict[str, set[str]]:
    known = {module_name(p, CHECKLIB.parent): p for p in CHECKLIB.rglob("*.py")}
    return {name: imports(name, path, set(known), top="checklib") - {"checklib"}
            for name, path in known.items()}


def test_the_checks_library_has_no_import_cycle():
    """Every import counts, those inside functions too: none may dodge a cycle."""
    assert_no_cycle(checklib_graph())


def test_general_mistakes_sit_below_the_comparisons_and_the_components():
    from grader.course import load_course

    edges = checklib_graph()
    components = {m for m in edges if m.startswith("checklib.mistakes.") and m != "checklib.mistakes.general"}
    assert "checklib.mistakes.general" in edges["checklib.compare"]  # a guard on the test itself
    assert len(components) == len(load_course().components)  # one module of mistakes per component
    below = {"checklib.catalogue", "checklib.tolerance"}
    assert edges["checklib.mistakes.general"] <= below, sorted(edges["checklib.mistakes.general"])
    assert not edges["checklib.compare"] & components, sorted(edges["checklib.compare"])
    for module in below:
        assert edges[module] <= below, (module, sorted(edges[module]))


def test_no_module_of_mistakes_defines_one_name_twice():
    """A name defined (or imported) twice in a module of tests/checklib/mistakes/ silently replaces the first
    (a component's diagnoses then come from another's model)."""
    import collections

    for path in sorted((CHECKLIB / "mistakes").glob("*.py")):
        tree = ast.parse(path.read_text())
        names = collections.Counter(
            name for node in tree.body
            for name in ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef))
                         else [a.asname or a.name for a in node.names] if isinstance(node, (ast.Import, ast.ImportFrom))
                         else [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)]))
        assert not [n for n, k in names.items() if k > 1], (path.name, sorted(n for n, k in names.items() if k > 1))


def test_the_grader_reaches_the_checks_library_through_one_seam():
    """Only grader/checks_library.py puts the checks' folder on sys.path and imports `checklib`; every other
    grader module that shares the checks' helpers goes through it (or reads the checks as text)."""
    seam = GRADER / "checks_library.py"
    for path in sorted(GRADER.rglob("*.py")):
        if path == seam or "templates" in path.parts:  # (templates: files the channels write, not grader code)
            continue
        tree = ast.parse(path.read_text())
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and not node.level}
        assert not {m for m in imported if m.split(".")[0] in ("checklib", "tests")}, path
        inserts = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                   and node.func.attr == "insert" and ast.unparse(node.func.value) == "sys.path"]
        assert not inserts, f"{path}: sys.path.insert outside the seam"
