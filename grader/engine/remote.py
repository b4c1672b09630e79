"""Student code for a tool outside a grading (`show`, the HTML page's figures): confined workers, as the checks get.

`remote_targets(folder)` copies the submission privately, confines its workers
as a grading does (grader/engine/runner.py), and yields the pool that hands out
one `Target` per component, every other component's code a trusted stand-in.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..sandbox import confine
from ..course import load_course
from ..sandbox.budget import bound_grader
from ..sandbox.confine import Plan
from ..sandbox.reaper import kill_strays
from ..sandbox.zygote import ZYGOTE
from ..source import private_copy
from .checks import WorkerPool
from .plugin import Submission
from .runner import budget_for, limits_for, protection, require_protection


@contextmanager
def remote_targets(target: str | Path, *, timeout: float | None = None) -> Iterator[WorkerPool]:
    """A pool of confined workers over a private copy of `target`: `pool.target(component)` is a Target."""
    ZYGOTE.start()
    chosen = protection()
    require_protection(chosen, own_code=True)  # `show`: the learner's own code, with a warning below the intended
    with private_copy(target, reachable=chosen == confine.USERS) as (folder, unreadable), \
            confine.hidden_while_grading(chosen), bound_grader(load_course().grader_memory_mb):
        pool = WorkerPool(Submission(folder, Plan.for_copy(chosen, folder, budget_for(timeout=timeout)), limits_for(timeout=timeout),
                                     dict(unreadable or {}), share=False))  # no session here grades again
        try:
            yield pool
        finally:
            pool.close()
            kill_strays()
