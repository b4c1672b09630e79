"""The exercises as shipped: the pristine stubs, whatever the learner has written in `exercises/`.

A drill starts from them and a release ships them, so neither may read the
learner's `exercises/`. They come from, in this order:

1. `grader/stubs/`, the pristine copy a student release ships (`release` writes
   it). It comes first because a release is often a git repository whose
   history holds the learner's own commits of `exercises/` (GitHub Classroom).
2. git's HEAD, in a checkout of the course repository: `git show HEAD:./exercises/<file>`.
   Text from HEAD must still be stubs (every contract name raises
   NotImplementedError), so solutions committed to `exercises/` are refused
   rather than drilled.

If neither holds them, `PristineStubsError` says so.

Translated stubs (`translate_stubs`) are the same files with their docstrings
and comments in another language: `grader/locale/<locale>/stubs/<file>`, kept
beside the catalogues so that a release and its drills carry them. A
translation whose code differs from the pristine stub's is not used (the
English stub is, with a warning): a stale translation never changes the code.
"""
from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from .contract import MODULES, OWNERS
from .i18n import LANGUAGES, LOCALE_DIR
from .paths import ROOT
from .syntax import code_without_docstrings, definition_source

EXERCISES_DIR = "exercises"
SHIPPED_DIR = Path("grader") / "stubs"  # under the repository root; written by `release`
STUB_FILES: tuple[str, ...] = ("__init__.py", *(f"{m}.py" for m in MODULES))
GIT_TIMEOUT_S = 10.0
# Set inside git hooks and by some tools; they would point git at another repository than root's.
GIT_REDIRECTS = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
                 "GIT_NAMESPACE")


class PristineStubsError(RuntimeError):
    """The pristine stubs cannot be found; the message says where they were looked for and why not."""


def shipped_stubs_dir(root: Path = ROOT) -> Path:
    """Where a student release keeps its pristine copy of the stubs: `<root>/grader/stubs/`."""
    return Path(root) / SHIPPED_DIR


def write_shipped_stubs(root: Path, stubs: dict[str, str]) -> Path:
    """Write `stubs` (file name -> text) as the pristine copy of the release at `root`; returns the folder."""
    folder = shipped_stubs_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    for name in STUB_FILES:
        (folder / name).write_text(stubs[name], encoding="utf-8")
    return folder


def pristine_stubs(root: Path = ROOT) -> dict[str, str]:
    """Contract file name (`__init__.py`, `attention.py`, ...) -> its pristine stub text.

    Never reads `<root>/exercises/`. Raises PristineStubsError when neither a
    shipped copy nor git's HEAD has them.
    """
    root = Path(root)
    shipped = _from_shipped(root)
    if isinstance(shipped, dict):
        return shipped
    from_git = _from_git(root)
    if isinstance(from_git, dict):
        return from_git
    raise PristineStubsError(
        "cannot find the pristine exercise stubs (a drill and a release start from them, never from your "
        f"edited {EXERCISES_DIR}/):\n  - {shipped}\n  - {from_git}\n"
        "  In a student release, restore grader/stubs/ from the release you were given; in the course "
        "repository, run from a git checkout with git installed.")


def translated_stubs_dir(lang: str) -> Path | None:
    """Where the stubs translated into `lang` are kept (None for the source language)."""
    return LOCALE_DIR / LANGUAGES[lang] / "stubs" if LANGUAGES[lang] else None


def translate_stubs(stubs: dict[str, str], lang: str, warn: Callable[[str], None] | None = None) -> dict[str, str]:
    """`stubs` with each file that has a translation into `lang` replaced by it.

    A file without a translation stays as it is; so does one whose translation's
    code is not the stub's (`warn`, if given, is told which).
    """
    folder = translated_stubs_dir(lang)
    if folder is None or not folder.is_dir():
        return dict(stubs)
    out = dict(stubs)
    for name, text in stubs.items():
        path = folder / name
        if not path.is_file():
            continue
        translated = path.read_text(encoding="utf-8")
        try:
            same = code_without_docstrings(translated) == code_without_docstrings(text)
        except SyntaxError:
            same = False
        if same:
            out[name] = translated
        elif warn is not None:
            warn(f"{path} is out of date (its code is not the stub's): the English {name} is used")
    return out


def changed_exercises(root: Path = ROOT, stubs: dict[str, str] | None = None) -> list[str]:
    """The contract files of `<root>/exercises/` that differ from the pristine stubs (or are missing).

    Line endings are not a change. Raises PristineStubsError as `pristine_stubs` does.
    """
    stubs = pristine_stubs(root) if stubs is None else stubs
    changed = []
    for name in STUB_FILES:
        try:
            text = (Path(root) / EXERCISES_DIR / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            changed.append(name)
            continue
        if _normal(text) != _normal(stubs[name]):
            changed.append(name)
    return changed


def _normal(text: str) -> str:
    return text.replace("\r\n", "\n")


def _from_shipped(root: Path) -> dict[str, str] | str:
    """The shipped copy, or why not."""
    folder = shipped_stubs_dir(root)
    if not folder.is_dir():
        return f"no shipped copy: {folder} does not exist"
    stubs = {}
    for name in STUB_FILES:
        try:
            stubs[name] = (folder / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            return f"the shipped copy in {folder} is incomplete: {name}: {exc}"
    solved = _not_stubs(stubs)
    if solved:
        return f"the shipped copy in {folder} holds written code, not stubs ({', '.join(solved)})"
    return stubs


def _from_git(root: Path) -> dict[str, str] | str:
    """The stubs at git's HEAD, or why not."""
    env = {k: v for k, v in os.environ.items() if k not in GIT_REDIRECTS}
    stubs = {}
    for name in STUB_FILES:
        spec = f"HEAD:./{EXERCISES_DIR}/{name}"  # ./ : relative to root, wherever the repository's top is
        try:
            done = subprocess.run(["git", "show", spec], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
        except FileNotFoundError:
            return "git is not installed (or not on PATH), so git's HEAD cannot be read"
        except subprocess.TimeoutExpired:
            return f"`git show {spec}` did not answer within {GIT_TIMEOUT_S:g} s"
        except OSError as exc:
            return f"could not run git: {exc}"
        if done.returncode != 0:
            why = done.stderr.decode("utf-8", "replace").strip().splitlines()
            return (f"cannot read {EXERCISES_DIR}/{name} from git's HEAD in {root}: "
                    f"{why[0] if why else f'git exited with {done.returncode}'}")
        try:
            stubs[name] = done.stdout.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"HEAD:{EXERCISES_DIR}/{name} is not UTF-8 text: {exc}"
    solved = _not_stubs(stubs)
    if solved:
        return (f"git's HEAD holds written code, not stubs, in {EXERCISES_DIR}/ ({', '.join(solved)} no longer "
                "raise NotImplementedError): were solutions committed there?")
    return stubs


def _not_stubs(stubs: dict[str, str]) -> list[str]:
    """The contract names whose definitions in `stubs` are missing or do not raise NotImplementedError."""
    bad = []
    for module, names in OWNERS.items():
        for name in names:
            try:
                source = definition_source(stubs[f"{module}.py"], name)
            except SyntaxError:
                source = None
            if source is None or "NotImplementedError" not in source:
                bad.append(f"{module}.{name}")
    return bad
