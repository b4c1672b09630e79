"""Alternative: a list-based cache, concatenated on demand."""
from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    def __init__(self) -> None:
        self.keys: list[Tensor] = []
        self.values: list[Tensor] = []
        self._length = 0

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        self.keys.append(k)
        self.values.append(v)
        self._length += k.shape[-2]
        if len(self.keys) > 1:
            self.keys = [torch.cat(self.keys, dim=2)]
            self.values = [torch.cat(self.values, dim=2)]
        return self.keys[0], self.values[0]

    def __len__(self) -> int:
        return self._length
