"""The Pre-LN Transformer block (component ``pre_ln_block``).

A block is two sub-layers, each wrapped in a residual connection: attention
(positions exchange information) and a position-wise feed-forward network
(each position thinks on its own). Shapes stay ``(B, T, D)`` throughout, so
blocks stack.

Where does the LayerNorm go? The original Transformer normalised *after* the
residual addition (Post-LN: ``x = norm(x + sublayer(x))``). Most models since
use **Pre-LN**, normalising only the sub-layer's input:

    x = x + dropout(attention(norm1(x)))
    x = x + dropout(ff(norm2(x)))

In Pre-LN the residual stream ``x`` is never normalised along the way: it is
an identity path from the input to the output of the whole stack, so
gradients reach the early layers undiminished. Pre-LN trains stably without
the learning-rate warm-up that Post-LN needs. (A final LayerNorm after the
last block is the model's business, not the block's.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

from .attention import MultiHeadAttention

if TYPE_CHECKING:  # imported for type hints only
    from .kv_cache import KVCache


class TransformerBlock(nn.Module):
    """Pre-LN block, ``(B, T, D)`` -> ``(B, T, D)``.

    Submodules (names are part of the contract: checks load state dicts by them):
      - ``attention``: ``MultiHeadAttention(d_model, n_heads)`` (with bias)
      - ``norm1``, ``norm2``: two *separate* ``nn.LayerNorm(d_model)``
      - ``ff``: ``nn.Sequential(nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model))``
      - ``dropout``: ``nn.Dropout(dropout)``

    Create no other parameters or submodules.
    """

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:
        """Create the submodules listed in the class docstring.

        TODO (pre_ln_block), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Create ``attention``, ``norm1``, ``norm2``, ``ff`` and ``dropout``
             exactly as listed above, with these names. The feed-forward net
             widens to ``d_ff`` (often ``4 * d_model``), applies ReLU, and
             narrows back to ``d_model``.
        """
        super().__init__()
        raise NotImplementedError("pre_ln_block: write TransformerBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None) -> Tensor:
        """Pre-LN: ``x = x + dropout(attention(norm1(x), mask, cache))``,
        then ``x = x + dropout(ff(norm2(x)))``; returns ``(B, T, D)``.

        ``mask`` and ``cache`` are passed straight on to ``self.attention`` (see
        ``MultiHeadAttention.forward``); the block does nothing else with them.

        TODO (pre_ln_block), in words:
          1. Normalise ``x`` with ``norm1`` and run attention on it, passing
             ``mask`` and ``cache`` along.
          2. Apply dropout and *add* the result to the un-normalised ``x``.
          3. Normalise the new ``x`` with ``norm2`` and run ``ff`` on it.
          4. Apply dropout, add to ``x`` again, and return it.
        Do not modify ``x`` in place (write ``x = x + ...``, not ``x += ...``).
        """
        raise NotImplementedError("pre_ln_block: write TransformerBlock.forward")
