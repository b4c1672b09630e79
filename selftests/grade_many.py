"""Grade many implementation folders in one process: `python -m selftests.grade_many OUT.json DIR ...`.

Writes {dir: report dict}. Used by the project's tests to grade the bug
catalogue without paying for a fresh interpreter per folder. `DIR::COMPONENT`
grades that component only (a catalogue bug fails its own component alone).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from selftests.catalogue_cache import CatalogueCache
from grader.engine.runner import run_checks


def main(argv: list[str]) -> int:
    out, *folders = argv
    # a catalogue bug changes one component: the others repeat the reference's results (the project's own code
    # only: selftests/catalogue_cache.py)
    cache = CatalogueCache()
    # processes=1: the project's tests run two of these side by side already
    reports = {}
    for argument in folders:
        folder, _, component = argument.partition("::")
        reports[argument] = run_checks(folder, [component] if component else None, cache=cache,
                                       processes=1).to_dict()
    Path(out).write_text(json.dumps(reports))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
