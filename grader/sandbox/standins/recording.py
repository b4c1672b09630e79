"""A grader tool: a KV cache that keeps every `update` call's arguments, so a check can see what was appended.

It records and passes each call on to the cache it wraps (the grader's where a
stand-in is loaded, else the student's own), so it is no answer itself.
"""
from __future__ import annotations

from torch import Tensor


class RecordingKVCache:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[Tensor, Tensor]] = []

    def update(self, k: Tensor, v: Tensor):
        self.calls.append((k.detach().clone(), v.detach().clone()))
        return self.inner.update(k, v)

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        return list(self.calls)

    def __len__(self) -> int:
        return len(self.inner)
