"""Seconds each component's checks take on the reference: the `cost` of each row of grader/contract.py's FACTS
(grader/engine/planning.py's COST).

    .venv/bin/python benchmarks/component_costs.py [--runs N]

Grades solutions/ N times in one grading process (as the planner's figures are only compared with each other,
one process measures them with the least noise), times every check case (pytest's whole protocol: setup, call,
teardown, and so the wait for a worker where a component's first case starts one), and prints each component's
median total, the `cost=` to write in its row of FACTS. Run it on an otherwise idle machine after a change that
moves time between components (a check's cases, a training task, a worker group).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.engine import runner  # noqa: E402


class Timer:
    """A pytest plugin that adds up each component's cases' time."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        started = time.perf_counter()
        yield
        self.seconds[item.get_closest_marker("component").args[0]] += time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    plugins, timers = runner.plugins, []

    def timed_plugins(submission):
        timers.append(Timer())
        return [timers[-1], *plugins(submission)]

    runner.plugins = timed_plugins
    runner.run_checks(ROOT / "solutions", processes=1)  # a round not counted: caches filled, files read once
    timers.clear()
    for _ in range(args.runs):
        runner.run_checks(ROOT / "solutions", processes=1)
    costs = {c: statistics.median(t.seconds[c] for t in timers) for c in timers[0].seconds}
    for component, seconds in sorted(costs.items(), key=lambda cs: -cs[1]):
        print(f"{component}: cost={seconds:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
