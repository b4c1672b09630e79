"""Grade a held-out set of bugs, kept outside the project, as the grader grades: `python -m selftests.bugs
--held-out SET.json [...]`.

A set is a JSON list of bugs written without reading the checks or the catalogue (the measure of how well the
feedback names bugs the project has not seen): each an object with `id`, `component`, `what` (the mistake in a
sentence) and either `file`, `old`, `new` (one edit of a file of solutions/, `old` occurring once) or `edits`, a
list of such edits. For each bug this prints its component's failing checks, every diagnosis line (or, where there
is none, the first failing message's first line), and any other component that fails too (unfair); whether a line
names the bug is for a person to judge.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

from . import materialize_edits


def _materialize(bug: dict, dest: Path) -> Path:
    edits = bug.get("edits") or [{"file": bug["file"], "old": bug["old"], "new": bug["new"]}]
    return materialize_edits(bug["id"], [(e["file"], e["old"], e["new"]) for e in edits], dest)


def held_out(paths: list[str]) -> int:
    from ..conftest import grade_folders

    bugs = [bug for path in paths for bug in json.loads(Path(path).read_text())]
    counts = {"caught": 0, "with a diagnosis": 0, "not caught": 0, "unfair": 0}
    with tempfile.TemporaryDirectory() as tmp:
        folders = {bug["id"]: _materialize(bug, Path(tmp) / f"bug{i}") for i, bug in enumerate(bugs)}
        reports = grade_folders(list(folders.values()), Path(tmp))
    for bug in bugs:
        components = reports[str(folders[bug["id"]])]["components"]
        own = [check for c in components if c["id"] == bug["component"] for check in c["checks"]
               if check["status"] != "passed"]
        others = sorted(c["id"] for c in components if c["id"] != bug["component"]
                        and any(check["status"] != "passed" for check in c["checks"]))
        lines = sorted({line.strip() for check in own for line in check["message"].splitlines()
                        if line.strip().startswith("diagnosis:")})
        counts["caught" if own else "not caught"] += 1
        counts["with a diagnosis"] += bool(lines)
        counts["unfair"] += bool(others)
        print(f"=== {bug['id']}: {bug['what']}")
        print(f"    {len(own)} failing: {', '.join(sorted({check['name'] for check in own}))}")
        for line in lines or ([f"(no diagnosis) {own[0]['message'].splitlines()[0]}"] if own else []):
            print(f"    {line}")
        if others:
            print(f"    OTHER COMPONENTS FAIL: {', '.join(others)}")
    print(f"{len(bugs)} bugs: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
    return 0
