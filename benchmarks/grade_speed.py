"""How long grading takes, against the cost of importing torch in the same run.

    .venv/bin/python benchmarks/grade_speed.py [--runs N] [--markdown]

Times (median of N rounds of cold runs, each a fresh interpreter): `python -c "import
torch"` (the measure of every ratio), the same import without Python's teardown of torch
at exit (which the grader skips: it ends with os._exit), `python -m grader grade solutions/` (a complete correct submission),
`python -m grader grade exercises/` (untouched stubs), `python -m grader
check` of masking and of kv_cache against solutions/, and of each track's
components (grader/contract.py's TRACKS). Run it on an otherwise idle machine.
`--markdown` prints the table the contributors' guide shows (docs/contributors.md),
with the date, the machine's load and the command that made it.
"""
from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.contract import TRACKS  # noqa: E402


# As on a learner's machine, Python may cache bytecode (a shell that sets PYTHONDONTWRITEBYTECODE would
# time compiling the grader's modules on every run instead).
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table (docs/contributors.md)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        results = str(Path(tmp) / "results.json")
        rows = [
            ("python -c 'import torch'", [py, "-c", "import torch"]),
            # the import alone: Python's teardown of torch (about 0.3 s), which the grader skips (grader/cli.py: run)
            ("python -c 'import torch, os; os._exit(0)'", [py, "-c", "import torch, os; os._exit(0)"]),
            ("grade solutions/ (all correct)", [py, "-m", "grader", "grade", "solutions", "--results", results]),
            ("grade exercises/ (untouched stubs)", [py, "-m", "grader", "grade", "exercises", "--results", results]),
            ("check masking --target solutions", [py, "-m", "grader", "check", "masking", "--target", "solutions"]),
            ("check kv_cache --target solutions", [py, "-m", "grader", "check", "kv_cache", "--target", "solutions"]),
            *((f"check <the {track} track> --target solutions", [py, "-m", "grader", "check", *ids, "--target", "solutions"])
              for track, ids in TRACKS.items()),
        ]
        # Rounds of one run each, so that every ratio compares runs made under the same load
        # (a shared machine's speed drifts over minutes).
        seconds: dict[str, list[float]] = {label: [] for label, _ in rows}
        ratios: dict[str, list[float]] = {label: [] for label, _ in rows}
        for label, cmd in rows:  # a round not counted: caches filled, files read once
            timed(cmd)
        for _ in range(args.runs):
            round_ = {label: timed(cmd) for label, cmd in rows}
            for label, value in round_.items():
                seconds[label].append(value)
                ratios[label].append(value / round_[rows[0][0]])
    if args.markdown:
        print(f"`benchmarks/grade_speed.py --runs {args.runs}`, {datetime.date.today()}, {os.cpu_count()} cores, "
              f"load average {load_before:.2f} before and {os.getloadavg()[0]:.2f} after "
              f"(medians of {args.runs} rounds; each ratio against `import torch` in the same round):\n")
        print("| command | time | vs `import torch` |\n|---|---:|---:|")
        for label, _ in rows:
            print(f"| `{label}` | {statistics.median(seconds[label]):.2f} s | {statistics.median(ratios[label]):.2f}x |")
        return 0
    print(f"median of {args.runs} rounds of cold runs (ratio: against import torch in the same round)")
    for label, _ in rows:
        print(f"  {label:<44} {statistics.median(seconds[label]):6.2f} s  "
              f"{statistics.median(ratios[label]):5.2f}x import torch")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
