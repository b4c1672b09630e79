"""Reading a submission's files safely: regular files only, never through a link, never blocking, capped.

A submission may hold anything a file system can: symbolic links to the
grader's secrets, FIFOs that block whoever opens them, device files, huge
files. The grader reads only the contract's files, and only those that are
plain regular files of a sane size; everything else reads as missing, with
the reason.
"""
from __future__ import annotations

import os
import shutil
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from .contract import MODULES

SUBMISSION_FILES: tuple[str, ...] = tuple(f"{m}.py" for m in MODULES)  # the files a submission consists of
MAX_BYTES = 1 << 20  # no exercise file comes near a megabyte
# Windows has none of O_NOFOLLOW, O_NONBLOCK (and no FIFOs), O_CLOEXEC, and wants O_BINARY for bytes as they are
_NO_FOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ_FLAGS = os.O_RDONLY | _NO_FOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(
    os, "O_BINARY", 0)


class UnreadableFile(Exception):
    """The file is not a regular file the grader may read (a link, a FIFO, too large, ...)."""


def read_file(path: str | Path, limit: int = MAX_BYTES) -> bytes:
    """The bytes of a regular file, opened without following a link and without blocking."""
    try:
        if not _NO_FOLLOW and Path(path).is_symlink():  # (Windows: no O_NOFOLLOW; its own learner's files)
            raise OSError(0, "a symbolic link")
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if Path(path).is_symlink():
            raise UnreadableFile(f"{Path(path).name} is a symbolic link; hand in the file itself") from None
        raise UnreadableFile(f"{Path(path).name} cannot be read: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnreadableFile(f"{Path(path).name} is not a regular file")
        if info.st_size > limit:
            raise UnreadableFile(f"{Path(path).name} is larger than {limit >> 10} KiB")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UnreadableFile(f"{Path(path).name} is larger than {limit >> 10} KiB")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | Path) -> str:
    return read_file(path).decode("utf-8", errors="replace")


COPY_GID_BASE = 900_000_000  # a private copy's own group ("users" protection); below the workers' user ids
_copies = 0


@contextmanager
def private_copy(folder: str | Path, reachable: bool = False) -> Iterator[tuple[str, dict[str, str]]]:
    """A copy of the submission's contract files that only this user can reach, and why others were left out.

    Yields (the copy's folder, {file: why it was not copied}). The copy's folder
    is `<private tmp>/submission`, beside the empty `root/` and `scratch/` a
    worker's sandbox needs (grader/sandbox/confine.py); all of it is removed afterwards.
    `reachable` (as root, for workers that run as users of their own): the folder belongs to a group of its own
    (`COPY_GID_BASE` + this process's pid and a count), mode 0710, so that only the workers given that group
    may pass through to it (never list it), and no worker grading another submission, nor any other user.
    """
    tmp = tempfile.mkdtemp(prefix="drills-grading-")  # mode 0700: no other user, no other worker sees it
    if reachable:
        global _copies
        _copies += 1
        os.chown(tmp, -1, COPY_GID_BASE + (os.getpid() << 4 | _copies & 15))
        os.chmod(tmp, 0o710)
    try:
        copy = Path(tmp) / "submission"
        for name in ("submission", "root", "scratch"):
            (Path(tmp) / name).mkdir(mode=0o755 if name != "scratch" else 0o711)
        unreadable: dict[str, str] = {}
        source = Path(folder)
        if source.is_dir():
            for name in SUBMISSION_FILES:
                path = source / name
                if not os.path.lexists(path):
                    continue
                try:
                    data = read_file(path)
                except UnreadableFile as exc:
                    unreadable[name] = str(exc)
                    continue
                (copy / name).write_bytes(data)
                (copy / name).chmod(0o644)
        yield (str(copy) if source.is_dir() else str(source.resolve())), unreadable
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def find_submission(folder: str | Path) -> Path | None:
    """The folder inside `folder` that holds the exercise files (most of them, least deep), or None.

    Gradescope unpacks a zip as the student made it, a class's folders nest as
    students hand them in: both find the exercise files this way."""
    folder = Path(folder)
    best: tuple[int, int, str] | None = None
    for path in folder.rglob("*.py"):
        if path.name not in SUBMISSION_FILES or "__MACOSX" in path.parts:
            continue
        parent = path.parent
        key = (-sum((parent / f).is_file() for f in SUBMISSION_FILES), len(parent.relative_to(folder).parts),
               str(parent))
        best = key if best is None or key < best else best
    return Path(best[2]) if best else None
