"""The table of component facts (grader/contract.py's FACTS) and every place that states it to people.

Each fact about a component is stated once, in its row: the lists of the grader derive from the table, and
what cannot derive (course.yml's component list, the README tables, the stubs' package docstrings, in both
languages) is held to it here.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from grader.contract import COMPONENTS, FACTS, FILES, MODULES, OWNERS, TRACKS

ROOT = Path(__file__).resolve().parent.parent
ROW = {row.id: row for row in FACTS}


def own_names(component: str) -> set[str]:
    """Every name the component's checks grade, and each method's short form (`forward`)."""
    return {form for names in OWNERS.values() for name, owners in names.items() if component in owners
            for form in (name, name.rpartition(".")[2])}


def piece_modules(component: str) -> set[str]:
    """The modules of the names a component's row gives a stand-in piece (its own code)."""
    return {name.partition(".")[0] for names in ROW[component].pieces.values() for name in names}


def test_each_row_is_whole_and_every_name_has_one_row():
    from grader.sandbox.standins import FOLDER, TOOLS

    assert len(ROW) == len(FACTS) and tuple(ROW) == COMPONENTS
    given = [name for row in FACTS for names in row.pieces.values() for name in names]
    assert len(given) == len(set(given)), "a name with two rows' pieces"
    for row in FACTS:
        assert row.files and all(f.removesuffix(".py") in MODULES for f in row.files), row.id
        assert row.pieces and piece_modules(row.id) <= {f.removesuffix(".py") for f in row.files}, row.id
        earlier = {name for other in FACTS[:FACTS.index(row)] for names in other.pieces.values() for name in names}
        assert set(row.also) <= earlier, (row.id, set(row.also) - earlier)  # shared names: the first owner's row
        assert row.cost > 0, row.id
    pieces = {piece for row in FACTS for piece in row.pieces}
    tools = {piece for piece, _ in TOOLS.values()}
    shipped = {p.stem for p in FOLDER.glob("*.py")} - {"__init__"}
    assert pieces <= shipped and shipped <= pieces | tools, (pieces - shipped, shipped - pieces - tools)


def test_each_component_has_its_checks_mistakes_and_bugs():
    for component in COMPONENTS:
        assert (ROOT / "tests" / f"test_{component}.py").is_file(), component
        assert (ROOT / "tests" / "checklib" / "mistakes" / f"{component}.py").is_file(), component
        assert (ROOT / "selftests" / "bugs" / f"bugs_{component}.py").is_file(), component


def test_the_figures_are_of_components():
    from grader.figures import FIGURES

    assert set(FIGURES) <= set(COMPONENTS)


def test_course_yml_lists_the_components_in_the_tables_order():
    from grader.course import load_course

    assert tuple(c.id for c in load_course(ROOT / "course.yml").components) == COMPONENTS


# --------------------------------------------------------------------------- the README tables

READMES = ["README.md", "README.zh-CN.md"]


def readme_table(readme: str) -> list[tuple[str, str, str]]:
    """(component, what you write, files) per row of the components table; ("", track, "") for a track's row."""
    text = (ROOT / readme).read_text()
    table = re.search(r"^\| [^|\n]+ \| [^|\n]+ \| [^|\n]+ \|\n\|---\|---\|---\|\n((?:\|.*\|\n)+)", text, re.MULTILINE)
    assert table, f"{readme} has no components table"
    rows = []
    for line in table.group(1).splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        found = re.fullmatch(r"`(\w+)`", cells[0])
        rows.append((found.group(1), cells[1], cells[2]) if found else ("", cells[0].strip("*"), ""))
    return rows


@pytest.mark.parametrize("readme", READMES)
def test_each_readme_table_holds_the_tracks_in_teaching_order(readme):
    """One row per component, in the table's order, a track's row before every track but the first."""
    groups: list[list[str]] = [[]]
    for component, _written, _files in readme_table(readme):
        if component:
            groups[-1].append(component)
        else:
            groups.append([])
    assert [tuple(g) for g in groups] == list(TRACKS.values()), readme


@pytest.mark.parametrize("readme", READMES)
def test_each_readme_row_states_the_files_and_only_names_its_component_owns(readme):
    """Where the component is written, in the table's order, and no name in "what you write" that another
    component owns."""
    for component, written, files in readme_table(readme):
        if not component:
            continue
        assert re.findall(r"`exercises/(\w+\.py)`", files) == list(FILES[component]), (readme, component, files)
        named = set(re.findall(r"`([\w.]+)`", written))
        assert named and named <= own_names(component), (readme, component, named - own_names(component))


# --------------------------------------------------------------------------- the stubs' package docstrings

STUBS = ["exercises/__init__.py", "grader/locale/zh_CN/stubs/__init__.py"]
NAMED = re.compile(r"((?:``[\w.]+``\s*(?:/\s*)?)+)\[(\w+)")  # ``a`` / ``b`` [component...


def stub_docstring(path: str) -> str:
    return ast.get_docstring(ast.parse((ROOT / path).read_text()))


def stub_sections(path: str) -> list[list[tuple[str, str, set[str]]]]:
    """Per block of "- ``file``: ..." bullets: (file, component, the names given it) for each bracket."""
    sections = []
    for block in re.findall(r"((?:^- ``.*\n(?:^  .*\n)*)+)", stub_docstring(path) + "\n", re.MULTILINE):
        found = []
        for bullet in re.split(r"^- ", block, flags=re.MULTILINE)[1:]:
            file = re.match(r"``(\w+\.py)``", bullet).group(1)
            for names, component in NAMED.findall(bullet):
                found.append((file, component, set(re.findall(r"``([\w.]+)``", names))))
        sections.append(found)
    return sections


@pytest.mark.parametrize("path", STUBS)
def test_each_stub_docstring_lists_each_track_with_its_files_and_names(path):
    """One block of bullets per track, each component under its own files, naming only names it owns."""
    sections = stub_sections(path)
    assert [sorted({c for _, c, _ in s}) for s in sections] == [sorted(t) for t in TRACKS.values()], path
    for section in sections:
        for file, component, names in section:
            assert file.removesuffix(".py") in piece_modules(component), (path, component, file)
            assert names and names <= own_names(component), (path, component, names - own_names(component))
    listed = {(file.removesuffix(".py"), component) for section in sections for file, component, _ in section}
    assert listed == {(m, c) for c in COMPONENTS for m in piece_modules(c)}, path


@pytest.mark.parametrize("path", STUBS)
def test_each_stub_docstring_states_the_teaching_order(path):
    stated = re.search(r"(\w+(?:,\s+\w+){5,})\.", stub_docstring(path))
    assert stated, f"{path} no longer states the teaching order"
    assert tuple(re.split(r",\s+", stated.group(1))) == COMPONENTS, path
