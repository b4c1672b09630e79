"""Sharing the checks out between grading processes, and the workers between components."""
from __future__ import annotations

# A helper process begins its checks after this one: it is forked once this one has started its zygote, then
# forks its own and collects its checks (measured on 2026-12-06: 0.03-0.07 s after, in gradings of solutions/).
HELPER_START_S = 0.05
# Seconds each component's checks take on the reference, one grading process on an idle machine (the time of its
# cases, so a component's first cases include the wait for its worker): benchmarks/component_costs.py's output
# of 2026-12-06, 5 runs. Only used to share components fairly between grading processes; a stale figure costs
# speed (the figures of 2026-12-02, from before workers were shared, left the core track's kv_cache alone in one
# process, which then finished 0.34 s before the other).
COST = {"vit_classifier": 0.305, "sampling": 0.275, "kv_cache": 0.274, "tiny_lm": 0.272, "pre_ln_block": 0.153,
        "multi_head_attention": 0.152, "window_attention": 0.134, "grouped_query_attention": 0.130, "optimizer": 0.127,
        "swin_windows": 0.111, "qkv_projection": 0.076, "rope": 0.065, "cross_entropy": 0.060, "patch_embedding": 0.058,
        "masking": 0.042, "sinusoidal_encoding": 0.040, "rms_norm": 0.039, "layer_norm": 0.038, "lr_schedule": 0.037,
        "head_splitting": 0.034, "scaling": 0.028, "swiglu": 0.020}

# Components whose checks reach none of each other's code: in one grading process they share a worker (a worker
# costs 15-25 ms of CPU to start, about what the checks of a small component take). The worker then holds no
# stand-in of any of them; each component's checks still get their own fresh import of the files, in which the
# names of the other components of the group are guarded: code that reaches one (a student's sampling calling
# their own training.softmax, say) has its component graded again in a worker of its own, with the stand-in
# (grader/engine/checks.py). A group is only a matter of speed: a wrong one costs time, never a point.
SHARED_WORKERS: tuple[frozenset[str], ...] = (
    frozenset({"qkv_projection", "scaling", "masking", "head_splitting", "sinusoidal_encoding", "patch_embedding",
               "swin_windows"}),
    frozenset({"layer_norm", "rms_norm", "rope", "swiglu", "cross_entropy", "optimizer", "lr_schedule"}),
    frozenset({"tiny_lm", "vit_classifier", "window_attention"}),
    # sampling's checks build a TinyLM (RMSNorm, SwiGLU, RoPE, GQA, KVCache); GQA calls the attention.py functions
    frozenset({"multi_head_attention", "sampling"}),
    frozenset({"pre_ln_block", "grouped_query_attention"}),
)
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
