"""Grading inside a notebook (the nbgrader channel): a test cell's score for one component.

A notebook made by `python -m grader nbgrader` writes the student's code into a
package folder (`submission/` next to the notebook) and ends each graded test
cell with `grade_component(ID)`: the points earned, in course.yml points, which
nbgrader reads as partial credit. The first call grades the whole folder once,
in a subprocess running `python -m grader grade` (student code never runs in
the kernel); later calls reuse the result while the folder's files are
unchanged. Each call prints, to stdout only (stderr zeroes a cell), the points
it returns and every check's outcome with its whole message (what was
expected, what came back, the `diagnosis:` and `hint:` lines); a hidden check
shows only whether it passed. Hidden checks count where the environment says
`DRILLS_HIDDEN_CHECKS=1` (the course's nbgrader_config.py sets it for the
kernels nbgrader starts), never in a student's own kernel. In a kernel, a
failing component whose message names figures (grader/figures.py) also shows
them, drawn by `python -m grader show` in a subprocess: they land in the
cell's outputs, so nbgrader's feedback carries them.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ... import i18n
from ...i18n import _
from ...inert import each_text, visible
from ...paths import ROOT
from ..render.formats import status_label

SUBMISSION = "submission"

_cache: dict[tuple[str, str], dict] = {}


class NotebookGradingError(RuntimeError):
    """The grader could not grade the notebook's code (not the student's fault)."""


def _fingerprint(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def grade_folder(folder: str | Path = SUBMISSION) -> dict:
    """The JSON report (`python -m grader grade --format json`) of `folder`, cached by its contents."""
    folder = Path(folder).resolve()
    key = (str(folder), _fingerprint(folder))
    if key not in _cache:
        with tempfile.TemporaryDirectory(prefix="drills-notebook-") as tmp:
            results = Path(tmp) / "results.json"
            proc = subprocess.run([sys.executable, "-m", "grader", "--lang", i18n.language(), "grade", str(folder),
                                   "--results", str(results), "--format", "json"], cwd=ROOT, env=_grader_env(),
                                  capture_output=True, text=True)
            if proc.returncode != 0 or not results.exists():
                raise NotebookGradingError(_("the grader failed (exit {code}):").format(code=proc.returncode)
                                           + f"\n{proc.stderr[-2000:]}{proc.stdout[-2000:]}")
            _cache[key] = json.loads(results.read_text())
    return _cache[key]


def check_folder(components: list[str] | tuple[str, ...], folder: str | Path = SUBMISSION) -> int:
    """Print what `python -m grader check COMPONENTS --target FOLDER` prints; its exit status.

    The self-study notebooks' grading cell (grader/channels/nbgrader/study.py): the same command in a
    subprocess, so the same checks, stand-ins and protection as `check` (student code never runs in the kernel
    that grades it).
    """
    proc = subprocess.run([sys.executable, "-m", "grader", "--lang", i18n.language(), "check", *components,
                           "--target", str(Path(folder).resolve())], cwd=ROOT, env=_grader_env(),
                          capture_output=True, text=True)
    print(proc.stdout.rstrip())  # the terminal's table (rich's styles, which a cell renders): student text in it is inert already
    if proc.returncode != 0:
        print(visible(_("the grader failed (exit {code}):").format(code=proc.returncode) + f"\n{proc.stderr[-2000:]}"))
    return proc.returncode


def _grader_env() -> dict[str, str]:
    """The environment of a `python -m grader` subprocess: this grader first on the path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "PYTHONDONTWRITEBYTECODE": "1"}


def show_figures(component_id: str, folder: str | Path = SUBMISSION) -> int:
    """In a notebook kernel, display `component_id`'s figures (`python -m grader show`); how many were shown.

    Outside a kernel (IPython not running) nothing is drawn. Drawing never fails the cell: a problem is
    printed (stdout) instead.
    """
    if "IPython" not in sys.modules:
        return 0
    from IPython import get_ipython
    from IPython.display import Image, display

    if get_ipython() is None:
        return 0
    with tempfile.TemporaryDirectory(prefix="drills-figures-") as tmp:
        proc = subprocess.run([sys.executable, "-m", "grader", "--lang", i18n.language(), "show", component_id,
                               "--target", str(Path(folder).resolve()), "--out", tmp], cwd=ROOT, env=_grader_env(),
                              capture_output=True, text=True)
        if proc.returncode != 0:
            why = visible((proc.stderr or proc.stdout).strip()[-300:])
            print("  " + _("figures could not be drawn: {why}").format(why=why))
            return 0
        pictures = sorted(Path(tmp).glob("*.png"))
        for path in pictures:
            display(Image(data=path.read_bytes(), format="png"))
    return len(pictures)


def _hidden_default() -> bool:
    return os.environ.get("DRILLS_HIDDEN_CHECKS", "") == "1"


def _indented(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line.strip() else "" for line in text.rstrip().splitlines())


def grade_component(component_id: str, *, hidden: bool | None = None, folder: str | Path = SUBMISSION,
                    show: bool = True) -> float:
    """Points earned by `component_id` (course.yml points), the value the graded cell shows.

    `hidden`: whether hidden checks count (None: where `DRILLS_HIDDEN_CHECKS=1`).
    With `show`, prints the same points, then one line per check and its whole
    message, indented (stdout only); a hidden check's outcome without its message.
    """
    if hidden is None:
        hidden = _hidden_default()
    report = grade_folder(folder)
    component = next((c for c in report["components"] if c["id"] == component_id), None)
    if component is None:
        raise NotebookGradingError(_("unknown component {component!r}").format(component=component_id))
    component = each_text(component, visible)  # a cell's output renders escape sequences and \r: none of theirs
    checks = [c for c in component["checks"] if hidden or not c.get("hidden")]
    score = round(sum(c["score"] for c in checks), 6)
    if show:
        status = component["status"]
        if checks and not hidden:  # the status of the checks shown
            passed = all(c["status"] == "passed" for c in checks)
            status = "passed" if passed else status if status != "passed" else "failed"
        most = sum(c["max_score"] for c in checks) if checks else component["max_score"]
        print(_("{component}: {score} of {most} points ({status})").format(
            component=component_id, score=f"{score:.2f}", most=f"{most:g}", status=status_label(status)))
        left_out = component["max_score"] - most
        if left_out > 1e-9:
            print("  " + _("(hidden checks, worth {points} points more, count when the course staff grade)").format(
                points=f"{left_out:g}"))
        if not checks and component.get("message"):
            print(_indented(component["message"], "    "))
        for check in checks:
            outcome = status_label(check["status"])
            if check.get("hidden"):  # as CheckResult.student_message: passed or failed, nothing more
                outcome = _("passed (hidden check)") if check["status"] == "passed" else _("failed (hidden check)")
            print(f"  {check['name']}: {check['score']:.2f}/{check['max_score']:.2f} {outcome}")
            message = (check.get("message") or "").strip()
            if check["status"] != "passed" and not check.get("hidden") and message.rstrip(":") not in (
                    check["status"], outcome):
                print(_indented(message, "      "))
        if component.get("figures"):
            show_figures(component_id, folder)
    return score
