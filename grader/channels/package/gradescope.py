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

from ...source import find_submission
from ...paths import COURSE_FILE, PYPROJECT, ROOT
from ...files import replacing
from ...i18n import N_, _, catalogue, language
from .generated import render

CPU_INDEX = "https://download.pytorch.org/whl/cpu"
FAILED = N_("the grader failed (exit {status}); please tell your instructor")  # run_autograder's last resort

def requirements() -> list[str]:
    """The project's dependencies except torch (setup.sh installs torch's CPU build)."""
    text = PYPROJECT.read_text()
    block = re.search(r"^dependencies\s*=\s*\[(.*?)\]", text, re.S | re.M)
    deps = re.findall(r'"([^"]+)"', block.group(1)) if block else []
    return [d for d in deps if not re.match(r"torch\b", d)]


def locate(folder: Path) -> Path:
    """The folder of the submission that holds the exercise files (Gradescope may nest them)."""
    return find_submission(folder) or Path(folder)


def _sources() -> list[tuple[Path, str]]:
    """(file, name in the zip) for everything shipped besides the two scripts."""
    items: list[tuple[Path, str]] = []
    for top in ("grader", "tests"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                items.append((path, str(path.relative_to(ROOT))))
    items += [(COURSE_FILE, "course.yml"), (PYPROJECT, "pyproject.toml")]
    return items


def _add(zf: zipfile.ZipFile, name: str, data: str | bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = ((0o755 if executable else 0o644) | 0o100000) << 16
    zf.writestr(info, data)


def build_autograder(out: Path, lang: str | None = None) -> Path:
    """The autograder zip; the students' feedback in `lang` (default: the language in use, grader/i18n.py)."""
    out, lang = Path(out), lang or language()
    failed = catalogue(lang).gettext(FAILED).format(status="$status")
    with replacing(out) as tmp, zipfile.ZipFile(tmp, "w") as zf:
        _add(zf, "setup.sh", render("gradescope_setup.sh", cpu_index=CPU_INDEX), executable=True)
        _add(zf, "run_autograder", render("gradescope_run_autograder", lang=lang, failed=failed), executable=True)
        _add(zf, "requirements.txt", "\n".join(requirements()) + "\n")
        for path, name in _sources():
            _add(zf, name, path.read_bytes())
    return out


def write_failure(results: Path, message: str) -> None:
    import json

    Path(results).parent.mkdir(parents=True, exist_ok=True)
    Path(results).write_text(json.dumps({"score": 0, "output": message, "tests": []}, indent=2))


def _gradescope(args: argparse.Namespace) -> int:
    out = build_autograder(Path(args.zip))
    print(_("Gradescope autograder written to {out} (upload it as the assignment's autograder zip; the students' "
            "feedback in the language it was built in: --lang)").format(out=out))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("gradescope", help=_("build a Gradescope autograder zip"))
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
