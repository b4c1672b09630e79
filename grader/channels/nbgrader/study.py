"""`python -m grader notebooks --out DIR`: one self-study notebook per track, for Jupyter or Colab.

Built from the nbgrader channel's cells (course.py's `_file_cells`, `_setup_cell`): the stubs' docstrings
as Markdown, a code cell per function or class holding the stub's code, each writing its file into
`submission/` (`%%writefile`), the files of the other tracks as their stubs. They differ from nbgrader's:
no nbgrader metadata or solution markers; a first cell (tagged `install`) that installs the kit where
`import grader` fails (Colab): it clones the repository and installs it with pip, editable so that the
course (course.yml, tests/) stays beside the grader, and torch, already installed there, is not reinstalled;
and a last cell that prints what `python -m grader check <the track's components> --target submission`
prints (notebook.py's `check_folder`: the same command, in a subprocess).

The built notebooks are committed under notebooks/ (Colab opens a committed file's URL);
selftests/test_notebooks.py fails when they differ from what this module builds (`make notebooks` rewrites
them), and runs each in a Jupyter kernel.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from ...contract import FILES, TRACKS
from ...course import load_assignments, load_course
from ...i18n import _, course_text, language
from .course import (SUB, _code_cell, _file_cells, _intro, _md, _setup_cell, _without_docstrings, nbformat_missing,
                     write_notebook)

# The repository the install cell clones. No public URL is recorded in the project yet: a placeholder, defined
# here only (the README's Colab links name the same repository).
REPOSITORY = "https://github.com/OWNER/transformer-drills"
NOTEBOOKS = "notebooks"  # where the built notebooks are committed, in the repository's root


def notebook_name(track: str, lang: str = "en") -> str:
    return f"{track}.ipynb" if lang == "en" else f"{track}.{lang}.ipynb"


def colab_url(track: str, lang: str = "en") -> str:
    """The address that opens the committed notebook of `track` on Colab (the READMEs link it)."""
    return (f"https://colab.research.google.com/github/{REPOSITORY.removeprefix('https://github.com/')}"
            f"/blob/main/{NOTEBOOKS}/{notebook_name(track, lang)}")


def _install_cell() -> str:
    about = _("Installs the kit where it is missing (Colab): clones the repository and installs it with pip.\n"
              "torch, already installed on Colab, is not reinstalled. Where `import grader` works, it does nothing.")
    return ("# " + "\n# ".join(about.splitlines()) + "\n"
            "import importlib.util, os, subprocess, sys\n\n"
            f"REPOSITORY = {REPOSITORY!r}\n"
            "if importlib.util.find_spec('grader') is None:\n"
            "    if not os.path.isdir('transformer-drills'):\n"
            "        subprocess.run(['git', 'clone', '--depth', '1', REPOSITORY, 'transformer-drills'], check=True)\n"
            "    subprocess.run([sys.executable, '-m', 'pip', 'install', '-q', '-e', 'transformer-drills'], check=True)\n"
            "    sys.path.insert(0, os.path.abspath('transformer-drills'))\n")


def _check_cell(track: str) -> str:
    components = ", ".join(repr(c) for c in TRACKS[track])
    return ("from grader.channels.nbgrader.notebook import check_folder\n\n"
            f"check_folder([{components}], {SUB!r})\n")


def build_study_notebook(track: str, code: str = "stub"):
    """The self-study notebook of `track`, in the language in use; `code="reference"`: the reference in its
    code cells (for the selftest)."""
    import nbformat

    course = load_course()
    selected = set(TRACKS[track])
    components = [c for c in course.components if c.id in selected]
    files = list(dict.fromkeys(f for c in components for f in FILES[c.id]))
    others = [f for f in dict.fromkeys(f for fs in FILES.values() for f in fs) if f not in files]
    assignment = next((a for a in load_assignments() if set(a.components) == selected), None)
    title = course_text(assignment.id, assignment.title) if assignment else track
    intro = _intro(title, _(
        "Replace each `raise NotImplementedError(...)` with your code, keeping the indentation. Each code "
        "cell writes your code to a file in `submission/`; after an edit, run the notebook top to bottom "
        "(Restart & Run All), then the last cell grades it with the same checks as `python -m grader "
        "check` and prints the same table."), components)
    cells = [_md(intro), _code_cell(_install_cell(), {"tags": ["install"]}), _code_cell(_setup_cell(), {})]
    for file in files:
        cells += _file_cells(file, selected, course, study=code)[0]
    for file in others:
        cells.append(_code_cell(f"%%writefile {SUB}/{file}\n# " + _("Not part of this track (do not edit): the "
                                "exercise file's stubs, without their docstrings.") + "\n" + _without_docstrings(file),
                                {}))
    cells.append(_md("## " + _("Check your work") + "\n\n" + _(
        "The cell below grades this track's components in a separate process and prints the table "
        "`python -m grader check` prints.")))
    cells.append(_code_cell(_check_cell(track), {"tags": ["check"]}))
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    for n, cell in enumerate(nb.cells):  # stable ids: a rebuild writes the same bytes
        cell["id"] = f"cell-{n}"
    return nb


def write_notebooks(out: Path) -> list[Path]:
    """Every track's notebook, in the language in use, into `out`."""
    return [write_notebook(build_study_notebook(track), out / notebook_name(track, language())) for track in TRACKS]


def _notebooks(args: argparse.Namespace) -> int:
    if nbformat_missing("python -m grader notebooks"):
        return 2
    for path in write_notebooks(Path(args.out)):
        print(_("wrote {path}").format(path=path))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("notebooks", help=_("write the self-study notebooks, one per track"))
    parser.add_argument("--out", default=NOTEBOOKS, metavar="DIR", help=_("folder to write them to (default: notebooks)"))
    parser.set_defaults(func=_notebooks)
