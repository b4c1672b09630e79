"""Benchmark `python -m grader grade-all` on a generated class.

    .venv/bin/python benchmarks/batch.py [--students 100] [--jobs 2] [--dedupe]

Generates N submissions into a temporary folder, mixed like a class: correct
copies of solutions/, variants from the bug catalogue (selftests.bugs), and
untouched stubs. Every submission gets its own comment line, as real students'
files differ, so by default no two are identical and none is graded from
another's results (--dedupe drops the comment and lets identical ones share).
Prints the time in all and per submission, and the comparison with nbgrader
autograde (3.2 s per notebook, serial, measured on this kit's machines).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from selftests.bugs import all_bugs, materialize  # noqa: E402

NBGRADER_S_PER_NOTEBOOK = 3.2


def generate(dest: Path, n: int, unique: bool = True) -> dict[str, int]:
    bugs = all_bugs()
    kinds = {"correct": 0, "bug": 0, "stubs": 0}
    for i in range(n):
        folder = dest / f"student{i:03d}"
        kind = ("correct", "bug", "bug", "stubs")[i % 4]  # a quarter correct, half buggy, a quarter untouched
        if kind == "bug":
            materialize(bugs[(i // 4 * 2 + i % 4) % len(bugs)], folder)
        else:
            shutil.copytree(ROOT / ("solutions" if kind == "correct" else "exercises"), folder,
                            ignore=shutil.ignore_patterns("__pycache__"))
        if unique:
            with open(folder / "positional.py", "a") as f:
                f.write(f"\n# submitted by student {i:03d}\n")
        kinds[kind] += 1
    return kinds


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dedupe", action="store_true", help="identical submissions (no per-student comment)")
    parser.add_argument("--no-cache", action="store_true", help="grade every component afresh (no reuse of results)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="drills-bench-") as tmp:
        subs, out = Path(tmp) / "submissions", Path(tmp) / "out"
        kinds = generate(subs, args.students, unique=not args.dedupe)
        command = [sys.executable, "-m", "grader", "grade-all", str(subs), "--out", str(out), "--jobs", str(args.jobs)]
        if args.no_cache:
            command.append("--no-cache")
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if result.returncode != 0:
            print(result.stdout, result.stderr, file=sys.stderr)
            return 1
        rows = (out / "gradebook.csv").read_text().splitlines()[1:]
    nbgrader = NBGRADER_S_PER_NOTEBOOK * args.students
    print(result.stdout.strip())
    print(f"{args.students} submissions ({kinds['correct']} correct, {kinds['bug']} buggy, {kinds['stubs']} stubs), "
          f"--jobs {args.jobs}{', identical ones shared' if args.dedupe else ', all distinct'}"
          f"{', no result cache' if args.no_cache else ''}: "
          f"{seconds:.1f} s in all, {seconds / args.students:.2f} s per submission "
          f"({len(rows)} gradebook rows)")
    print(f"nbgrader autograde of the same as notebooks: ~{nbgrader:.0f} s ({NBGRADER_S_PER_NOTEBOOK} s each, serial); "
          f"speed-up {nbgrader / seconds:.1f}x (target: 20x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
