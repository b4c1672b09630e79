"""Fixtures of the project's own tests: graded reports of many implementations."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from selftests.bugs import ROOT, all_bugs, alternative_names, materialize, materialize_alternative
from selftests import trivial as trivial_catalogue

WORKERS = 2  # these machines have two cores

# The tests read the grader's English; a Chinese locale (grader/i18n.py) would translate what they read.
# selftests/test_i18n.py chooses the language of its own runs.
if any(os.environ.get(var, "").lower().startswith("zh") for var in ("LC_ALL", "LC_MESSAGES", "LANG")):
    os.environ["LC_ALL"] = "C.UTF-8"


GRADE_MANY = (sys.executable, "-m", "selftests.grade_many")


def grade_folders(folders: list[Path | str], out_dir: Path, env: dict[str, str] | None = None, *,
                  command: tuple[str, ...] = GRADE_MANY, cwd: Path = ROOT,
                  drop: tuple[str, ...] = ()) -> dict[str, dict]:
    """Grade folders (or `folder::component`, selftests/grade_many.py) in parallel subprocesses (`env`: variables
    to set, LC_ALL say; `drop`: variables to unset) by `command OUT FOLDER...` run in `cwd`; returns
    {folder: report dict}."""
    chunks = [folders[i::WORKERS] for i in range(WORKERS) if folders[i::WORKERS]]
    env = {**{k: v for k, v in os.environ.items() if k not in drop}, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    procs = []
    for i, chunk in enumerate(chunks):
        out = out_dir / f"reports-{i}.json"
        procs.append((out, subprocess.Popen([*command, str(out), *map(str, chunk)], cwd=cwd, env=env,
                                            stderr=subprocess.PIPE, text=True)))
    reports: dict[str, dict] = {}
    for out, proc in procs:
        _, err = proc.communicate(timeout=1200)
        assert proc.returncode == 0, f"grading failed:\n{err[-4000:]}"
        reports.update(json.loads(out.read_text()))
    return reports


@pytest.fixture(scope="session")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """Reports for solutions, the stubs, every catalogue bug and every alternative, keyed by a label."""
    base = tmp_path_factory.mktemp("graded")
    folders: dict[str, Path] = {"solutions": ROOT / "solutions", "exercises": ROOT / "exercises"}
    for bug in all_bugs():
        folders[f"bug:{bug.id}"] = materialize(bug, base / bug.id.replace(":", "__"))
    for name in alternative_names():
        folders[f"alternative:{name}"] = materialize_alternative(name, base / f"alt__{name}")
    reports = grade_folders(list(folders.values()), base)
    result = {label: reports[str(folder)] for label, folder in folders.items()}
    shutil.rmtree(base, ignore_errors=True)
    return result


@pytest.fixture(scope="session")
def trivial(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    """The report of every trivial submission (selftests/trivial/), keyed by its kind."""
    base = tmp_path_factory.mktemp("trivial")
    folders = {kind: trivial_catalogue.materialize(kind, base / kind) for kind in trivial_catalogue.KINDS}
    reports = grade_folders(list(folders.values()), base)
    result = {kind: reports[str(folder)] for kind, folder in folders.items()}
    shutil.rmtree(base, ignore_errors=True)
    return result
