"""How long `check --watch` takes from saving a file to the printed table, against a cold `check`.

    .venv/bin/python benchmarks/watch_latency.py [--component masking] [--saves N] [--source solutions]

Starts `python -m grader check COMPONENT --watch --target COPY` on a temporary
copy of solutions/ (or exercises/), waits for its first table, then saves the
component's first file N times (new bytes each time: a comment added; written
beside it, fsynced, renamed over it as editors save) and times each from the
rename to the end of the printed table. After each save it times one cold run,
`python -m grader check COMPONENT --target COPY` (a fresh interpreter), so that
both figures come from the same minutes of a shared machine. Prints the
medians in seconds, the cold one as a multiple of the warm one, how much of a
save's time the grading itself took ("graded in"), and the load average
before and after.
"""
from __future__ import annotations

import argparse
import os
import queue
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.contract import COMPONENTS, FILES  # noqa: E402
from grader.source import SUBMISSION_FILES  # noqa: E402

GRADED_IN = re.compile(r"graded.* in ([0-9.]+) s")


def save(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def next_table(lines: queue.Queue, timeout: float = 60) -> str:
    """The watcher's next table (it ends with its "watching ..." line)."""
    block = []
    deadline = time.monotonic() + timeout
    while True:
        line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        if line is None:
            raise EOFError("".join(block))
        block.append(line)
        if line.startswith("watching "):
            return "".join(block)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--component", default="masking", choices=COMPONENTS)
    parser.add_argument("--saves", type=int, default=10, help="saves timed (each followed by one cold run)")
    parser.add_argument("--source", default="solutions", choices=("solutions", "exercises"))
    args = parser.parse_args()
    load_before = os.getloadavg()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "submission"
        folder.mkdir()
        for name in SUBMISSION_FILES:
            shutil.copy(ROOT / args.source / name, folder / name)
        path = folder / FILES[args.component][0]
        original = path.read_text()
        cold_cmd = [py, "-m", "grader", "check", args.component, "--target", str(folder)]
        log = open(Path(tmp) / "watcher.log", "w+")  # its stderr: shown only if it ends early
        watcher = subprocess.Popen([*cold_cmd, "--watch"], cwd=ROOT, stdout=subprocess.PIPE, stderr=log, text=True)
        lines: queue.Queue = queue.Queue()

        def read() -> None:
            for line in watcher.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=read, daemon=True).start()
        warm, graded, cold = [], [], []
        try:
            next_table(lines)
            for i in range(args.saves):
                time.sleep(0.3)  # the watcher idle, as between a learner's saves
                save(path, f"{original}\n# save {i}\n")
                saved = time.perf_counter()
                table = next_table(lines)
                warm.append(time.perf_counter() - saved)
                graded.append(float(GRADED_IN.search(table).group(1)))
                started = time.perf_counter()
                subprocess.run(cold_cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
                cold.append(time.perf_counter() - started)
        except EOFError as exc:
            log.seek(0)
            raise SystemExit(f"the watcher ended:\n{exc}{log.read()}") from None
        finally:
            watcher.terminate()
            watcher.wait()
            log.close()
    load_after = os.getloadavg()
    w, c, g = statistics.median(warm), statistics.median(cold), statistics.median(graded)
    print(f"{args.component} ({args.source}/), median of {args.saves} saves, {os.cpu_count()} cores")
    print(f"  save -> table (--watch): {w:.3f} s  (min {min(warm):.3f}, max {max(warm):.3f}; grading itself {g:.3f} s)")
    print(f"  cold check:              {c:.3f} s  ({c / w:.1f}x the watched save)")
    print(f"  load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
