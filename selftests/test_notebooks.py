"""The self-study notebooks (notebooks/, `python -m grader notebooks`; issue 34 §3).

The committed notebooks are built files: each must be what the generator writes today, in both languages
(as grader/locale/grader.pot is to `make check-messages`; `make notebooks` rewrites them). Each track's
English notebook runs headless in a Jupyter kernel (nbclient), once per variant: as shipped (every
component "not started") and with the reference in its code cells (full marks); its last cell prints
`python -m grader check`'s table. The install cell runs too, and does nothing: `import grader` works in the
test's kernel (this checkout, first on PYTHONPATH). The READMEs link every notebook on Colab.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader.channels.nbgrader import study
from grader.contract import TRACKS
from grader.course import load_course

nbformat = pytest.importorskip("nbformat", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")
nbclient = pytest.importorskip("nbclient", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")
pytest.importorskip("ipykernel", reason="the nbgrader extra is not installed (pip install '.[nbgrader]')")

ROOT = Path(__file__).resolve().parent.parent
LANGS = ("en", "zh")
ROW = re.compile(r"^(\w+)\s+(\d+)/(\d+)\s+(.+?)\s*$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("notebooks")
    for lang in LANGS:
        subprocess.run([sys.executable, "-m", "grader", "--lang", lang, "notebooks", "--out", str(out)],
                       cwd=ROOT, check=True, capture_output=True)
    return out


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("track", TRACKS)
def test_committed_notebook_is_built(built: Path, track: str, lang: str) -> None:
    name = study.notebook_name(track, lang)
    committed = ROOT / study.NOTEBOOKS / name
    assert committed.is_file(), f"{committed} is missing: run `make notebooks`"
    assert committed.read_text() == (built / name).read_text(), \
        f"{committed} differs from what `python -m grader notebooks` builds: run `make notebooks` and commit"


def test_no_other_notebooks() -> None:
    expected = {study.notebook_name(t, lang) for t in TRACKS for lang in LANGS}
    assert {p.name for p in (ROOT / study.NOTEBOOKS).glob("*.ipynb")} == expected


@pytest.mark.parametrize("readme", ["README.md", "README.zh-CN.md"])
def test_readmes_link_the_notebooks(readme: str) -> None:
    text = (ROOT / readme).read_text()
    lang = "zh" if "zh" in readme else "en"
    for track in TRACKS:
        assert study.colab_url(track, lang) in text, f"{readme} does not link {study.colab_url(track, lang)}"


def _table(nb) -> dict[str, tuple[int, int, str]]:
    """The check cell's table: component -> (points, most, status)."""
    cell = next(c for c in nb.cells if "check" in c.metadata.get("tags", []))
    text = ANSI.sub("", "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream"))
    rows = {}
    for line in text.splitlines():
        match = ROW.match(line)
        if match and match.group(1) != "total":
            rows[match.group(1)] = (int(match.group(2)), int(match.group(3)), match.group(4))
    return rows


@pytest.fixture(scope="module")
def kernel(tmp_path_factory) -> str:
    """A kernel spec of this Python, first on JUPYTER_PATH: a user's own `python3` spec (another Python, where
    `import grader` fails) would make the install cell clone the repository."""
    path = tmp_path_factory.mktemp("jupyter")
    spec = path / "kernels" / "drills-selftest" / "kernel.json"
    spec.parent.mkdir(parents=True)
    spec.write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                "display_name": "drills selftest", "language": "python"}))
    return str(path)


@pytest.mark.parametrize("variant", ["stub", "reference"])
@pytest.mark.parametrize("track", TRACKS)
def test_notebook_grades_in_a_kernel(tmp_path: Path, monkeypatch, kernel: str, track: str, variant: str) -> None:
    if variant == "stub":  # as shipped
        nb = nbformat.read(ROOT / study.NOTEBOOKS / study.notebook_name(track), as_version=4)
    else:
        nb = study.build_study_notebook(track, "reference")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    monkeypatch.setenv("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    monkeypatch.setenv("JUPYTER_PATH", kernel)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="drills-selftest",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert not (tmp_path / "transformer-drills").exists(), "the install cell cloned the kit where it was importable"
    points = {c.id: c.points for c in load_course().components}
    rows = _table(nb)
    assert set(rows) == set(TRACKS[track]), rows
    for component, (score, most, status) in rows.items():
        assert most == points[component]
        if variant == "stub":
            assert (score, status) == (0, "not started"), (component, score, status)
        else:
            assert (score, status) == (most, "passed"), (component, score, status)


def test_a_chinese_notebook_holds_no_english_prose_in_what_the_grader_writes() -> None:
    """As test_i18n's test of the Chinese nbgrader course: the cells the builder words itself (the introduction,
    the install and setup cells' comments, the other tracks' files, the "check your work" part), not the stubs'
    docstrings (the translated stubs, tested in test_i18n) nor code."""
    from selftests.test_i18n import NAMES, _kept_in_course_texts, english_prose

    kept = NAMES | _kept_in_course_texts() | {"Colab", "pip"}  # names: the service, the installer
    for track in TRACKS:
        nb = nbformat.read(ROOT / study.NOTEBOOKS / study.notebook_name(track, "zh"), as_version=4)
        assert 'set_language("zh")' in nb.cells[2].source
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                if cell.source.startswith(("## `", "### `")):
                    continue  # a stub's docstring
                text = cell.source
            else:
                code = re.sub(r'NotImplementedError\(\s*"[^"]*"\s*\)', " ", cell.source)  # the stubs' code, as in English
                words = [s for s in re.findall(r'"((?:[^"\\]|\\.)*)"', code) if " " in s]  # a message, not a path
                text = "\n".join(re.findall(r"#(.*)", code) + words)
            assert [w for w in english_prose(text) if w not in kept] == [], (track, cell.source[:300])
