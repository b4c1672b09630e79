"""A key/value cache for autoregressive decoding (component ``kv_cache``).

When a decoder generates text one token at a time, step ``t`` needs the keys
and values of all positions ``0 .. t``. Without a cache each step recomputes
them for the whole prefix: quadratic work overall. But the keys and values of
earlier positions never change (causal attention: the past does not see the
future), so we can compute each position's ``k`` and ``v`` once, keep them, and
at every step project only the new tokens.

The cache stores keys and values *after* projection and ``split_heads``, each
``(B, H, T_cached, Dh)``; positions are along dimension ``-2``.

The other half of this component is in attention.py: the cache branch of
``MultiHeadAttention.forward`` (appends the new keys/values, lets the new
queries attend with ``causal_mask(T_new, T_total)``, and raises ``ValueError``
when a mask is passed with a cache).
"""
from __future__ import annotations

import torch
from torch import Tensor


class KVCache:
    """Keys and values of the positions decoded so far, each ``(B, H, T_cached, Dh)``.

    ``KVCache()`` starts empty (``len(cache) == 0``). One cache belongs to one
    attention layer (a model with several layers keeps one per layer).
    """

    def __init__(self) -> None:
        """Start empty.

        TODO (kv_cache), in words:
          1. Create whatever holds the cached keys and values (for example two
             attributes that start as None, or two empty lists).
        """
        raise NotImplementedError("kv_cache: write KVCache.__init__")

    def update(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``k``, ``v`` and return everything cached so far.

        ``k`` and ``v`` are ``(B, H, T_new, Dh)``. They go *after* what is cached,
        along the sequence dimension (-2). Returns ``(k_all, v_all)``, each
        ``(B, H, T_cached + T_new, Dh)``, oldest position first. The returned
        tensors may share storage with the cache; gradients need not flow
        through them.

        TODO (kv_cache), in words:
          1. If the cache is empty, the new keys and values are the whole cache.
          2. Otherwise concatenate the old and the new along dimension -2.
          3. Store the result and return the keys and values.
        """
        raise NotImplementedError("kv_cache: write KVCache.update")

    def __len__(self) -> int:
        """The number of cached positions (0 when empty; ``T`` is size -2 of the keys).

        TODO (kv_cache), in words:
          1. Return 0 if nothing is cached, else the length of the sequence dimension.
        """
        raise NotImplementedError("kv_cache: write KVCache.__len__")
