"""`python -m grader gradescope OUT.zip`: a Gradescope autograder.

The zip holds setup.sh and run_autograder at its root, with the grader, every
check (hidden ones included), course.yml and pyproject.toml; never solutions/.
Gradescope unpacks it into /autograder/source, runs setup.sh once to build the
image, and run_autograder per submission: it copies /autograder/submission,
finds the folder holding the exercise files, grades it with
`python -m grader grade` and writes /autograder/results/results.json, in which
hidden checks are visible only after grades are published.

For testing, run_autograder takes its root from $AUTOGRADER_ROOT (default
/autograder) and its Python from $DRILLS_PYTHON (default python3).
"""
from __future__ import annotations

import argparse
import re
import sys
import zipfile
from pathlib import Path

from .source import FILES as SUBMISSION_FILES

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
FILES = SUBMISSION_FILES

SETUP_SH = """\
#!/usr/bin/env bash
# Gradescope image set-up: Python, the CPU build of torch, the grader's dependencies.
set -euo pipefail
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-pip >/dev/null
python3 -m pip install --quiet --break-system-packages --upgrade pip 2>/dev/null \\
  || python3 -m pip install --quiet --upgrade pip
PIP="python3 -m pip install --quiet"
$PIP --break-system-packages --version >/dev/null 2>&1 && PIP="$PIP --break-system-packages"
$PIP torch --index-url {cpu_index}
$PIP -r /autograder/source/requirements.txt
"""

RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Grade one Gradescope submission; always leaves a results.json behind.
set -uo pipefail
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${DRILLS_PYTHON:-python3}"
SOURCE="$ROOT/source"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
cp -R "$ROOT/submission/." "$WORK/" 2>/dev/null || true
chmod -R a+rX "$WORK"
chmod 755 "$WORK"
cd "$SOURCE"
SUBMISSION="$("$PY" -m grader.gradescope locate "$WORK")"
"$PY" -m grader grade "$SUBMISSION" --results "$RESULTS"
status=$?
if [ ! -s "$RESULTS" ]; then
  "$PY" -m grader.gradescope failed "$RESULTS" "the grader failed (exit $status); please tell your instructor"
fi
exit 0
"""


def requirements() -> list[str]:
    """The project's dependencies except torch (setup.sh installs torch's CPU build)."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
    deps = re.findall(r'"([^"]+)"', block.group(1)) if block else []
    return [d for d in deps if not re.match(r"torch\b", d)]


def locate(folder: Path) -> Path:
    """The folder of the submission that holds the exercise files (Gradescope may nest them)."""
    folder = Path(folder)
    best: tuple[int, int, str] | None = None
    for path in folder.rglob("*.py"):
        if path.name not in FILES or "__MACOSX" in path.parts:
            continue
        parent = path.parent
        found = sum((parent / f).is_file() for f in FILES)
        key = (-found, len(parent.relative_to(folder).parts), str(parent))
        best = key if best is None or key < best else best
    return Path(best[2]) if best else folder


def _sources() -> list[tuple[Path, str]]:
    """(file, name in the zip) for everything shipped besides the two scripts."""
    items: list[tuple[Path, str]] = []
    for top in ("grader", "tests"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                items.append((path, str(path.relative_to(ROOT))))
    items += [(ROOT / "course.yml", "course.yml"), (ROOT / "pyproject.toml", "pyproject.toml")]
    return items


def _add(zf: zipfile.ZipFile, name: str, data: str | bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
    zf.writestr(info, data)


def build_autograder(out: Path) -> Path:
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with zipfile.ZipFile(tmp, "w") as zf:
        _add(zf, "setup.sh", SETUP_SH.format(cpu_index=CPU_INDEX), executable=True)
        _add(zf, "run_autograder", RUN_AUTOGRADER, executable=True)
        _add(zf, "requirements.txt", "\n".join(requirements()) + "\n")
        for path, name in _sources():
            _add(zf, name, path.read_bytes())
    tmp.replace(out)
    return out


def write_failure(results: Path, message: str) -> None:
    import json

    Path(results).parent.mkdir(parents=True, exist_ok=True)
    Path(results).write_text(json.dumps({"score": 0, "output": message, "tests": []}, indent=2))


def _gradescope(args: argparse.Namespace) -> int:
    out = build_autograder(Path(args.zip))
    print(f"Gradescope autograder written to {out} (upload it as the assignment's autograder zip)")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("gradescope", help="build a Gradescope autograder zip")
    parser.add_argument("zip", metavar="OUT.zip")
    parser.set_defaults(func=_gradescope)


if __name__ == "__main__":  # helpers of run_autograder
    command, *rest = sys.argv[1:]
    if command == "locate":
        print(locate(Path(rest[0])))
    elif command == "failed":
        write_failure(Path(rest[0]), rest[1])
    else:
        raise SystemExit(f"unknown helper {command!r}")
