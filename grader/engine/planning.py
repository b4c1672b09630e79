"""Sharing the checks out between grading processes."""
from __future__ import annotations

# A helper process starts about when this one does: it forks its own zygote while this one checks the files
# (measured: both begin their checks within 0.01 s).
HELPER_START_S = 0.01
# Seconds each component's checks take on the reference: the time of its items in gradings of solutions/ with two
# processes, as this module shares them out (so a component's first items include the wait for its worker), as a
# share of all items' time (median of 5 gradings, 2026-12-02), scaled to a grading's 3.7 s. Only used to share
# components fairly between grading processes; a stale figure costs speed (with the figures of 2026-12-01,
# measured one process at a time, the second process finished 0.2-1.1 s after the first).
COST = {"vit_classifier": 0.71, "kv_cache": 0.61, "sampling": 0.36, "tiny_lm": 0.32, "window_attention": 0.19,
        "pre_ln_block": 0.17, "multi_head_attention": 0.16, "rope": 0.15, "optimizer": 0.15,
        "grouped_query_attention": 0.15, "swin_windows": 0.13, "cross_entropy": 0.087, "patch_embedding": 0.073,
        "lr_schedule": 0.069, "masking": 0.062, "layer_norm": 0.055, "sinusoidal_encoding": 0.054,
        "qkv_projection": 0.053, "head_splitting": 0.05, "rms_norm": 0.043, "swiglu": 0.032, "scaling": 0.031}


def plan_shards(components: list[str], processes: int) -> list[tuple[list[str], int, int]]:
    """Who grades what: per process, (components, index, count): every `count`-th case from `index` on.

    Whole components where there are enough of them (each component's worker
    then starts once); the cases of a lone component are dealt out instead.
    """
    if processes <= 1 or not components:
        return [(components, 0, 1)]
    if len(components) == 1:
        return [(components, index, processes) for index in range(processes)]
    groups: list[list[str]] = [[] for _ in range(processes)]
    load = [0.0] + [HELPER_START_S] * (processes - 1)
    for component in sorted(components, key=lambda c: -COST.get(c, 0.1)):  # longest first, to the least loaded
        least = load.index(min(load))
        groups[least].append(component)
        load[least] += COST.get(component, 0.1)
    return [(group, 0, 1) for group in groups if group]
