"""Try catalogue bugs by hand: `python -m selftests.bugs [--diagnoses] [COMPONENT|BUG_ID ...]`, or grade a
held-out set kept outside the project: `python -m selftests.bugs --held-out SET.json ...` (selftests/bugs/heldout.py).

For each bug, runs the graded checks against solutions/ with the bug applied
and prints which components' checks fail. OK means: its own component fails,
no other component does. With `--diagnoses`, grades the bugs as the grader
does and prints the known mistakes its diagnoses name (or what names it) as
selftests/test_diagnosis.py judges them.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from . import ROOT, all_bugs, materialize


def failing_checks(folder: Path) -> dict[str, list[str]]:
    """component -> names of failing checks, from a pytest run of tests/ against `folder`."""
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", str(ROOT / "tests"), "--target", str(folder), "-q",
             "-p", "no:cacheprovider", f"--junitxml={xml}", "-o", "junit_family=xunit2"],
            cwd=ROOT, capture_output=True, text=True,
        )
        failing: dict[str, list[str]] = {}
        for case in ET.parse(xml).getroot().iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                component = case.get("classname", "").rpartition(".")[2].removeprefix("test_")
                failing.setdefault(component, []).append(case.get("name", ""))
        return failing


def diagnoses(bugs: list) -> int:
    """Grade `bugs` as the grader does; print the known mistakes each one's diagnoses name, judged as the
    selftest does."""
    from selftests.test_diagnosis import diagnosed, failing_messages

    from ..conftest import grade_folders

    with tempfile.TemporaryDirectory() as tmp:
        folders = {bug.id: materialize(bug, Path(tmp) / bug.id.replace(":", "__")) for bug in bugs}
        reports = grade_folders(list(folders.values()), Path(tmp))
    bad = 0
    for bug in bugs:
        report = reports[str(folders[bug.id])]
        lines = diagnosed(report, bug.component)
        if bug.named_by:
            ok = not lines and any(bug.named_by in m for m in failing_messages(report, bug.component))
            said = [f"named by its check: {bug.named_by!r}"] + lines
        else:
            ok = bool(lines) and all(any(known in line for known in bug.diagnosis) for line in lines)
            said = sorted({" or ".join(line) for line in lines}) or ["no diagnosis"]
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {bug.id}: " + "\n      ".join(said))
    print(f"{len(bugs) - bad} of {len(bugs)} bugs named by their own diagnosis")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--held-out"]:
        from .heldout import held_out

        return held_out(argv[1:])
    show_diagnoses = "--diagnoses" in argv
    argv = [a for a in argv if a != "--diagnoses"]
    bugs = [b for b in all_bugs() if not argv or b.component in argv or b.id in argv]
    if show_diagnoses:
        return diagnoses(bugs)
    bad = 0
    for bug in bugs:
        with tempfile.TemporaryDirectory() as tmp:
            failing = failing_checks(materialize(bug, Path(tmp) / "impl"))
        own = failing.get(bug.component, [])
        others = {c: n for c, n in failing.items() if c != bug.component}
        ok = bool(own) and not others
        bad += not ok
        print(f"{'OK ' if ok else 'BAD'} {bug.id}: {len(own)} own failing" + (f"; others failing: {others}" if others else ""))
    print(f"{len(bugs) - bad} of {len(bugs)} bugs caught fairly")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
