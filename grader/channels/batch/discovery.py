"""Finding a class's submissions: one folder per student, and a fingerprint of what decides each grade."""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from ...paths import CHECKS_DIR
from ...source import SUBMISSION_FILES, UnreadableFile, find_submission, read_file


@dataclass
class Student:
    name: str
    folder: Path | None  # the folder holding the exercise files; None when there is nothing to grade
    fingerprint: str
    problem: str = ""  # why it cannot be graded (then folder is None)


def grader_fingerprint() -> str:
    """Changes whenever the checks, the grader or the course change: results made before are then stale."""
    from ...engine.cache import grader_fingerprint as fingerprint

    return fingerprint(str(CHECKS_DIR))[:16]


def _contents(path: Path) -> bytes:
    """A file's bytes for the fingerprint; a link, FIFO or huge file by what it is (never opened through)."""
    if not os.path.lexists(path):
        return b"<missing>"
    try:
        return read_file(path)
    except UnreadableFile as exc:
        return f"<{exc}>".encode()


def discover(submissions: Path, grader_fp: str) -> list[Student]:
    students = []
    for entry in sorted(Path(submissions).iterdir()):
        if not entry.is_dir() or entry.name.startswith((".", "_")):
            continue
        folder = find_submission(entry)
        digest = hashlib.sha256(grader_fp.encode())
        if folder is not None:
            for name in SUBMISSION_FILES:
                path = folder / name
                digest.update(name.encode() + b"\0" + _contents(path) + b"\0")
            students.append(Student(entry.name, folder, digest.hexdigest()))
            continue
        notebooks = sorted(entry.rglob("*.ipynb"))
        for path in notebooks:
            digest.update(_contents(path))
        problem = ("notebook submissions are not supported by grade-all yet; hand in the exercise files"
                   if notebooks else "no exercise files found (" + ", ".join(SUBMISSION_FILES) + ")")
        students.append(Student(entry.name, None, digest.hexdigest(), problem))
    return students
