"""Grouped-query attention (component ``grouped_query_attention``).

Multi-head attention gives each of its ``n_heads`` heads its own queries, keys
and values. When a language model generates text, the keys and values of every
past position are kept in a KV cache (kv_cache.py), one ``(B, H, T, Dh)``
tensor each per layer, and that cache, not the arithmetic, is what fills the
memory of a long context and what each decoding step has to read back.

Grouped-query attention (Ainslie et al., 2023, "GQA"; used by LLaMA 2 70B,
LLaMA 3, Mistral) keeps ``n_heads`` query heads but computes only
``n_kv_heads`` key/value heads, ``n_kv_heads`` dividing ``n_heads``. The query
heads are split into ``n_kv_heads`` groups of ``n_rep = n_heads // n_kv_heads``
consecutive heads, and every head of a group attends with the group's one
key/value head::

    query head h  ->  key/value head h // n_rep
    e.g. n_heads = 6, n_kv_heads = 2:  heads 0, 1, 2 use kv head 0; heads 3, 4, 5 use kv head 1

The cache then holds ``n_kv_heads`` heads instead of ``n_heads``: ``n_rep``
times less memory, for a small loss of quality. ``n_kv_heads == n_heads`` is
plain multi-head attention, ``n_kv_heads == 1`` is multi-query attention
(Shazeer, 2019). The keys and values are repeated to ``n_heads`` heads only for
the attention itself (``repeat_kv``), never in the cache: repeating them before
caching would throw the saving away.

The order of the repetition matters and is invisible in the shapes: head ``j``
of ``repeat_kv``'s output is input head ``j // n_rep`` (``[a, a, b, b]``, as
``torch.repeat_interleave(x, n_rep, dim=1)`` gives), not ``j % n_kv_heads``
(``[a, b, a, b]``, what ``x.repeat(1, n_rep, 1, 1)`` gives).

Rotary position embeddings (rope.py) go with it: with ``rope = (cos, sin)``
the queries and keys are rotated by ``apply_rope`` after the head split. With a
cache the new positions are not ``0 .. T-1`` but ``start .. start + T - 1``,
``start = len(cache)`` (read before updating the cache), and the keys are
rotated *before* they are cached: a cached key keeps the rotation of its own
position, and is never rotated again.

You may call your own ``split_heads``, ``merge_heads``, ``causal_mask`` and
``scaled_dot_product_attention`` from attention.py and ``apply_rope`` from
rope.py (while this component is graded, the grader's versions stand in for
them). PyTorch's ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention``
are not allowed here.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import causal_mask, merge_heads, scaled_dot_product_attention, split_heads
from .rope import apply_rope

if TYPE_CHECKING:
    from .kv_cache import KVCache


def repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    """``(B, Hkv, T, Dh)`` -> ``(B, Hkv * n_rep, T, Dh)``: output head ``j`` is input head ``j // n_rep``.

    Each key/value head appears ``n_rep`` times in a row, as
    ``torch.repeat_interleave(x, n_rep, dim=1)`` would give. ``n_rep == 1``
    returns the same values. Raises ``ValueError`` if ``n_rep < 1`` (graded).

    TODO (grouped_query_attention), in words:
      1. If ``n_rep`` is below 1, raise ``ValueError``.
      2. Give ``x`` a new axis right after the heads, of size ``n_rep``, whose
         entries all repeat the head they belong to (``expand`` does it
         without copying).
      3. Merge the heads axis and the new axis into one of size
         ``Hkv * n_rep`` (heads first, so the copies of a head stay together).
    """
    raise NotImplementedError("grouped_query_attention: write repeat_kv")


class GroupedQueryAttention(nn.Module):
    """``n_heads`` query heads sharing ``n_kv_heads`` key/value heads; ``(B, T, D)`` -> ``(B, T, D)``.

    Attributes (names are part of the contract and graded):
      - ``d_model``, ``n_heads``, ``n_kv_heads``, ``d_k`` (``= d_model // n_heads``,
        the size of every head, query or key/value)
      - ``w_q``: ``nn.Linear(d_model, d_model)``, the ``n_heads`` query heads
      - ``w_k``, ``w_v``: ``nn.Linear(d_model, n_kv_heads * d_k)``, only the
        ``n_kv_heads`` key/value heads (narrower than ``w_q`` unless
        ``n_kv_heads == n_heads``)
      - ``out_proj``: ``nn.Linear(d_model, d_model)``
      all four with ``bias=bias``. Create no other parameters or submodules.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, bias: bool = False) -> None:
        """Create the four projections.

        Raises ``ValueError`` (graded) if ``d_model`` is not divisible by
        ``n_heads``, if ``n_kv_heads < 1``, or if ``n_heads`` is not divisible
        by ``n_kv_heads``.

        TODO (grouped_query_attention), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Check the three conditions above and raise ``ValueError`` if one
             fails (test ``n_kv_heads < 1`` before dividing by it).
          3. Store ``d_model``, ``n_heads``, ``n_kv_heads`` and ``d_k``.
          4. Create ``w_q``, ``w_k``, ``w_v`` and ``out_proj`` with the sizes
             listed in the class docstring, each with ``bias=bias``.
        """
        super().__init__()
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.__init__")

    def forward(
        self,
        x: Tensor,
        mask: Tensor | None = None,
        *,
        rope: tuple[Tensor, Tensor] | None = None,
        cache: KVCache | None = None,
    ) -> Tensor:
        """Attention of ``x (B, T, D)``; returns ``(B, T, D)``.

        ``mask`` (bool, True = may attend) is broadcastable to
        ``(B, n_heads, T, T)``, as in ``MultiHeadAttention``; None attends
        everywhere. ``rope`` is ``(cos, sin)`` from ``rope_angles``, or None
        for no rotation.

        With a ``KVCache``, ``x`` holds the next ``T`` positions after the
        ``len(cache)`` cached ones. ``cache.update(k, v)`` appends this call's
        keys and values (``n_kv_heads`` heads, rotated keys) and returns those
        of every position so far; the new queries attend to all of them and
        causally among themselves, ``causal_mask(T, T_total)``. A cache implies
        its own mask: a ``mask`` together with a ``cache`` raises ``ValueError``
        (graded).

        TODO (grouped_query_attention), in words:
          1. If both a mask and a cache are given, raise ``ValueError``.
          2. Project ``x`` with ``w_q``, ``w_k``, ``w_v``; split the queries
             into ``n_heads`` heads and the keys and values into
             ``n_kv_heads`` heads, each as ``split_heads`` does.
          3. If ``rope`` is given: the positions of this call run from
             ``start`` (``len(cache)``, or 0 without a cache) for ``T``
             positions; rotate the queries and the keys (not the values) at
             those positions with ``apply_rope``.
          4. If a cache is given: replace the keys and values with what
             ``cache.update`` returns, and use the causal mask from the new
             positions to all positions as the mask.
          5. Repeat the keys and values to ``n_heads`` heads with
             ``repeat_kv`` (after the cache, so it keeps ``n_kv_heads``), and
             attend with ``scaled_dot_product_attention`` and the mask.
          6. Merge the heads and apply ``out_proj``.
        """
        raise NotImplementedError("grouped_query_attention: write GroupedQueryAttention.forward")
