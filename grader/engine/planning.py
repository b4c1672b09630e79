"""Sharing the checks out between grading processes."""
from __future__ import annotations

# A helper process starts about when this one does: it forks its own zygote while this one checks the files
# (measured: both begin their checks within 0.01 s).
HELPER_START_S = 0.01
# Seconds each component's checks take on the reference (the time of its items in a grading with processes=1,
# in workers, on a quiet machine of these, 2026-12-01). Only used to share components fairly between grading
# processes; a stale figure costs speed.
COST = {"kv_cache": 0.27, "pre_ln_block": 0.15, "multi_head_attention": 0.15, "patch_embedding": 0.06,
        "qkv_projection": 0.12, "sinusoidal_encoding": 0.04, "masking": 0.04, "head_splitting": 0.03,
        "scaling": 0.025, "optimizer": 0.14, "cross_entropy": 0.06, "layer_norm": 0.04, "rms_norm": 0.04,
        "swiglu": 0.02, "lr_schedule": 0.04, "rope": 0.07, "grouped_query_attention": 0.13, "tiny_lm": 0.26,
        "sampling": 0.25, "vit_classifier": 0.27, "swin_windows": 0.11, "window_attention": 0.13}


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
