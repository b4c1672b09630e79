"""Sharing the checks out between grading processes, and the workers between components."""
from __future__ import annotations

from ..contract import FACTS

# A helper process begins its checks after this one: it is forked once this one has started its zygote, then
# forks its own and collects its checks (measured on 2026-12-06: 0.03-0.07 s after, in gradings of solutions/).
HELPER_START_S = 0.05
# Seconds each component's checks take on the reference, one grading process on an idle machine (the time of its
# cases, so a component's first cases include the wait for its worker): contract.FACTS's `cost`, from
# benchmarks/component_costs.py's output. Only used to share components fairly between grading processes; a stale
# figure costs speed (the figures of 2026-12-02, from before workers were shared, left the core track's kv_cache
# alone in one process, which then finished 0.34 s before the other).
COST: dict[str, float] = {row.id: row.cost for row in FACTS}

# Components whose checks reach none of each other's code (contract.FACTS's `worker`, the group's name): in one
# grading process they share a worker (a worker costs 15-25 ms of CPU to start, about what the checks of a small
# component take). The worker then holds no stand-in of any of them; each component's checks still get their own
# fresh import of the files, in which the names of the other components of the group are guarded: code that
# reaches one (a student's sampling calling their own training.softmax, say) has its component graded again in a
# worker of its own, with the stand-in (grader/engine/checks.py). A group is only a matter of speed: a wrong one
# costs time, never a point.
_GROUPS = dict.fromkeys(row.worker for row in FACTS if row.worker)  # their names, in teaching order
SHARED_WORKERS: tuple[frozenset[str], ...] = tuple(frozenset(row.id for row in FACTS if row.worker == group)
                                                   for group in _GROUPS)
# What a worker of its own costs, in COST's units: the saving of a component that joins a group-mate's process.
WORKER_COST = 0.02


def worker_group(component: str) -> frozenset[str]:
    """The components that may share a worker with `component` (itself alone if none)."""
    return next((group for group in SHARED_WORKERS if component in group), frozenset({component}))


def plan_shards(components: list[str], processes: int) -> list[tuple[list[str], int, int]]:
    """Who grades what: per process, (components, index, count): every `count`-th case from `index` on.

    Whole components where there are enough of them (each component's worker
    then starts once); the cases of a lone component are dealt out instead. A
    component goes where it ends soonest, a worker's start saved where a process
    has a member of its SHARED_WORKERS group already.
    """
    if processes <= 1 or not components:
        return [(components, 0, 1)]
    if len(components) == 1:
        return [(components, index, processes) for index in range(processes)]
    groups: list[list[str]] = [[] for _ in range(processes)]
    load = [0.0] + [HELPER_START_S] * (processes - 1)
    for component in sorted(components, key=lambda c: -COST.get(c, 0.1)):  # longest first, to the least loaded
        mates = worker_group(component) - {component}
        after = [load[p] + COST.get(component, 0.1) - (WORKER_COST if mates & set(groups[p]) else 0.0)
                 for p in range(processes)]
        best = after.index(min(after))
        groups[best].append(component)
        load[best] = after[best]
    return [(group, 0, 1) for group in groups if group]
