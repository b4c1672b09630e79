"""A key/value cache for autoregressive decoding (reference solution)."""
from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """Keys and values of the positions decoded so far, each (B, H, T_cached, Dh)."""

    def __init__(self) -> None:
        self.k: Tensor | None = None
        self.v: Tensor | None = None

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append k, v (B, H, T_new, Dh) and return everything cached so far."""
        if self.k is None:
            self.k, self.v = k, v
        else:
            self.k = torch.cat([self.k, k], dim=-2)
            self.v = torch.cat([self.v, v], dim=-2)
        return self.k, self.v

    def __len__(self) -> int:
        return 0 if self.k is None else self.k.size(-2)
