"""Sharing the checks out between grading processes."""
from __future__ import annotations

# A helper process starts later than this one: it forks its own zygote, and gets its share only after
# the import check (measured: it ends 0.1-0.2 s after this one on equal shares).
HELPER_START_S = 0.15
# Seconds each component's checks take on the reference (benchmarks/grade_speed.py's machine, one
# process, in workers: a component that makes many round trips costs more there than under plain pytest).
# Only used to share components fairly between grading processes; a stale figure costs speed.
COST = {"kv_cache": 0.73, "pre_ln_block": 0.42, "multi_head_attention": 0.39, "patch_embedding": 0.14,
        "qkv_projection": 0.12, "sinusoidal_encoding": 0.10, "masking": 0.08, "head_splitting": 0.08,
        "scaling": 0.03, "optimizer": 1.0, "cross_entropy": 0.12, "layer_norm": 0.1, "rms_norm": 0.1, "swiglu": 0.1,
        "lr_schedule": 0.05, "rope": 0.3, "grouped_query_attention": 0.4, "tiny_lm": 1.7, "sampling": 1.0,
        "vit_classifier": 1.6, "swin_windows": 0.4, "window_attention": 0.6}


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
