"""Seconds each component's checks take on the reference: the figures grader/engine/planning.py's COST holds.

    .venv/bin/python benchmarks/component_costs.py [--runs N]

Runs `python -m grader grade solutions/` N times, cold and as a learner runs it (two grading processes where
two cores are free), times every check case in both processes (pytest's whole protocol: setup, call, teardown,
and so the wait for a worker where a component's first case starts one), and prints each component's median
total as the `COST = {...}` literal to paste into planning.py, and how much later the helper process starts
its first case than the first process (HELPER_START_S). Costs measured in one warm process (as this did until
2026-12-06) came out 10-40% under these, unevenly: the planner then gave one process 0.1-0.2 s more than the
other. Run it on an otherwise idle machine after a change that moves time between components (a check's
cases, a training task, SHARED_WORKERS).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Timer:
    """A pytest plugin that adds up each component's cases' time, and writes it to `folder` at the session's end."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.first: float | None = None
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        started = time.time()
        self.first = self.first or started
        yield
        self.seconds[item.get_closest_marker("component").args[0]] += time.time() - started

    def pytest_sessionfinish(self) -> None:
        with open(os.path.join(self.folder, f"{os.getpid()}.json"), "w") as out:
            json.dump({"pid": os.getpid(), "parent": os.getppid(), "first": self.first, "seconds": self.seconds}, out)


def child(folder: str) -> None:
    """One cold grading, timed (this script run again with --child)."""
    from grader import cli
    from grader.engine import runner

    plugins = runner.plugins
    runner.plugins = lambda submission: [Timer(folder), *plugins(submission)]
    sys.argv = ["grader", "grade", str(ROOT / "solutions"), "--results", os.path.join(folder, "results.json")]
    cli.run()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--child", metavar="FOLDER", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return 0
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    costs: dict[str, list[float]] = defaultdict(list)
    later: list[float] = []
    for run in range(args.runs + 1):  # the first not counted: caches filled, files read once
        with tempfile.TemporaryDirectory() as folder:
            subprocess.run([sys.executable, __file__, "--child", folder], check=True, env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL)
            timed = [json.loads(p.read_text()) for p in Path(folder).glob("[0-9]*.json")]
        if run == 0:
            continue
        for process in timed:
            for component, seconds in process["seconds"].items():
                costs[component].append(seconds)
        helpers = [p for p in timed if any(p["parent"] == q["pid"] for q in timed)]
        if len(timed) == 2 and len(helpers) == 1:  # the helper is the other's child
            main_process = next(p for p in timed if p is not helpers[0])
            later.append(helpers[0]["first"] - main_process["first"])
    medians = {c: statistics.median(s) for c, s in costs.items()}
    items = ", ".join(f'"{c}": {s:.3f}' for c, s in sorted(medians.items(), key=lambda cs: -cs[1]))
    print(f"COST = {{{items}}}")
    if later:
        print(f"HELPER_START_S = {statistics.median(later):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
