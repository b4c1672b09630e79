"""Benchmark `python -m grader grade-all` on a generated class.

    .venv/bin/python benchmarks/batch.py [--students 100] [--jobs 2] [--dedupe] [--nbgrader N]

Generates N submissions into a temporary folder, mixed like a class: correct
copies of solutions/, variants from the bug catalogue (selftests.bugs), and
untouched stubs. Every submission gets its own comment line, as real students'
files differ, so by default no two are identical and none is graded from
another's results (--dedupe drops the comment and lets identical ones share).
Prints the time in all and per submission, and the comparison with nbgrader
autograde (3.2 s per notebook, serial, measured on this kit's machines).

This machine's speed drifts (a shared VM: `import torch` takes 1.4 s on a good
day and 2.5 s on a slow one), so `--nbgrader N` also times, right after the
batch, `nbgrader autograde` of N copies of the smallest torch notebook (one
solution cell, one graded test cell) and compares with that as well: the
least any nbgrader grading with torch costs on this machine at this time
(the kit's own notebooks cost more).
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


SMALL_NOTEBOOK_CELLS = [
    ("solution", "import torch\n\ndef scores(q, k):\n    ### BEGIN SOLUTION\n"
                 "    return q @ k.transpose(-2, -1) / q.size(-1) ** 0.5\n    ### END SOLUTION\n"),
    ("test", "q, k = torch.randn(2, 3, 4), torch.randn(2, 3, 4)\n"
             "assert torch.allclose(scores(q, k), q @ k.transpose(-2, -1) / 2)\n"),
]


def nbgrader_seconds_per_notebook(n: int, tmp: Path) -> float:
    """`nbgrader autograde` of n submissions of the smallest torch notebook: seconds per notebook."""
    import os

    import nbformat

    course = tmp / "nbgrader-floor"
    (course / "source" / "ps").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'floor'\n")
    cells = []
    for kind, source in SMALL_NOTEBOOK_CELLS:
        meta = {"schema_version": 3, "grade_id": kind, "solution": kind == "solution", "grade": kind == "test",
                "locked": kind == "test", "task": False, **({"points": 1} if kind == "test" else {})}
        cells.append(nbformat.v4.new_code_cell(source, metadata={"nbgrader": meta}))
    nbformat.write(nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": {
        "name": "python3", "display_name": "Python 3", "language": "python"}}), course / "source" / "ps" / "ps.ipynb")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(*args: str) -> None:
        subprocess.run(["nbgrader", *args], cwd=course, env=env, check=True, capture_output=True)

    run("generate_assignment", "ps", "--force")
    for i in range(n):
        (course / "submitted" / f"s{i}" / "ps").mkdir(parents=True)
        shutil.copy(course / "source" / "ps" / "ps.ipynb", course / "submitted" / f"s{i}" / "ps" / "ps.ipynb")
    started = time.perf_counter()
    run("autograde", "ps", "--create", "--force")
    return (time.perf_counter() - started) / n


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--dedupe", action="store_true", help="identical submissions (no per-student comment)")
    parser.add_argument("--no-cache", action="store_true", help="grade every component afresh (no reuse of results)")
    parser.add_argument("--nbgrader", type=int, default=0, metavar="N",
                        help="also time nbgrader autograde of N small torch notebooks (needs the nbgrader extra)")
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
        measured = nbgrader_seconds_per_notebook(args.nbgrader, Path(tmp)) if args.nbgrader else None
    nbgrader = NBGRADER_S_PER_NOTEBOOK * args.students
    print(result.stdout.strip())
    print(f"{args.students} submissions ({kinds['correct']} correct, {kinds['bug']} buggy, {kinds['stubs']} stubs), "
          f"--jobs {args.jobs}{', identical ones shared' if args.dedupe else ', all distinct'}"
          f"{', no result cache' if args.no_cache else ''}: "
          f"{seconds:.1f} s in all, {seconds / args.students:.2f} s per submission "
          f"({len(rows)} gradebook rows)")
    print(f"nbgrader autograde of the same as notebooks: ~{nbgrader:.0f} s ({NBGRADER_S_PER_NOTEBOOK} s each, serial); "
          f"speed-up {nbgrader / seconds:.1f}x (target: 20x)")
    if measured is not None:
        print(f"nbgrader autograde measured now ({args.nbgrader} small torch notebooks): {measured:.2f} s each, "
              f"~{measured * args.students:.0f} s for {args.students}; speed-up {measured * args.students / seconds:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
