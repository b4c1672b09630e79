"""A grader tool: a KV cache that keeps every `update` call's arguments, so a check can see what was appended.

It is a working KVCache, so a worker that grades kv_cache loads it only where
the checks that need it run, apart from the student's own cache.
"""
from __future__ import annotations

import torch
from torch import Tensor


class RecordingKVCache:
    def __init__(self) -> None:
        self.calls: list[tuple[Tensor, Tensor]] = []

    def update(self, k: Tensor, v: Tensor):
        self.calls.append((k.detach().clone(), v.detach().clone()))
        return torch.cat([c[0] for c in self.calls], dim=-2), torch.cat([c[1] for c in self.calls], dim=-2)

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        return list(self.calls)

    def __len__(self) -> int:
        return sum(c[0].shape[-2] for c in self.calls)
