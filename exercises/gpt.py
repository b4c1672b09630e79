"""A tiny LLaMA-style language model (component ``tiny_lm``), the capstone of the LLM track.

Everything you built comes together here. A decoder-only language model reads
token ids ``(B, T)`` and gives, at every position, scores (logits) over the
vocabulary for the *next* token:

    x = tok_emb(idx)                        # (B, T, D): one learned vector per token id
    for block in blocks:  x = block(x)      # the positions talk (attention) and think (SwiGLU)
    logits = head(norm(x))                  # (B, T, vocab_size)

**The block** is LLaMA's: *pre-norm* (each branch normalises its own input,
with RMSNorm; the residual stream itself is never normalised, so it stays an
identity path from the embeddings to the last block), grouped-query attention
with RoPE, and a SwiGLU feed-forward network:

    h   = x + attn(attn_norm(x), mask, rope=rope, cache=cache)
    out = h + ffn(ffn_norm(h))

Both residuals add the branch to what *came into* it (``x``, then ``h``), not
to its normalised version. Because the stream is never normalised inside the
blocks, the model normalises it once more (``norm``) before the head.

**Positions** come only from RoPE: there is no positional embedding to add. The
rotation tables depend on ``max_len`` and on the width of *one head*
(``d_model // n_heads``, since each head's queries and keys are rotated), not
on anything learned, so they are computed once in ``__init__`` and shared by
every block. Register them with ``self.register_buffer(name, table,
persistent=False)``: a buffer follows the model in ``.to(device)`` and
``.to(torch.float64)`` (a plain attribute would stay behind on the CPU), and
``persistent=False`` keeps it out of the ``state_dict``, so a checkpoint holds
only what was learned and loads into a model built for another ``max_len``.

**Causality.** Without caches the model sees all ``T`` positions at once and
must not let position ``t`` look at ``t + 1 ...`` (it would read the answer it
is asked to predict): give the blocks a causal mask (``causal_mask`` in
attention.py). With caches (decoding, see ``sampling.generate``), ``idx`` holds
only the *next* positions; the attention then masks by itself over the cached
keys, so the mask is ``None``, and every block gets *its own* cache (block
``i``'s keys are not block ``j``'s). The new positions start at
``len(caches[0])``: ``GroupedQueryAttention`` reads that from its cache to
rotate at the right positions.

``nn.TransformerDecoderLayer``, ``nn.TransformerEncoderLayer`` and
``nn.MultiheadAttention`` are rejected by the checks: use your own parts
(``RMSNorm``, ``GroupedQueryAttention``, ``SwiGLU``, ``rope_angles``,
``KVCache``). When this passes, train it: ``python -m grader train``.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

# the parts you built (or, while a check of tiny_lm runs, the grader's trusted versions of them)
from .attention import causal_mask
from .ffn import SwiGLU
from .gqa import GroupedQueryAttention
from .kv_cache import KVCache
from .norms import RMSNorm
from .rope import rope_angles


class DecoderBlock(nn.Module):
    """Pre-norm decoder block; ``(B, T, D)`` -> ``(B, T, D)``.

    Submodules (names are part of the contract: checks load state dicts by them):
      - ``attn_norm``: ``RMSNorm(d_model, eps)``, normalises the attention's input
      - ``attn``: ``GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)``
      - ``ffn_norm``: ``RMSNorm(d_model, eps)``, normalises the feed-forward's input
      - ``ffn``: ``SwiGLU(d_model, d_ff)``

    No dropout, nothing else.
    """

    def __init__(self, d_model: int, n_heads: int, n_kv_heads: int, d_ff: int, eps: float = 1e-5) -> None:
        """Create the four submodules.

        TODO (tiny_lm), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Create the submodules listed in the class docstring, with these
             names: two separate RMSNorms (each branch learns its own weight).
        """
        super().__init__()
        raise NotImplementedError("tiny_lm: write DecoderBlock.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None, *, rope: tuple[Tensor, Tensor] | None = None,
                cache: KVCache | None = None) -> Tensor:
        """``x`` ``(B, T, D)`` -> ``(B, T, D)``; ``mask``, ``rope`` and ``cache`` go to the attention as they are.

        TODO (tiny_lm), in words:
          1. Normalise ``x`` with ``attn_norm`` and attend with it (passing on
             the mask, the RoPE tables and the cache); add the result to ``x``
             itself: that is ``h``.
          2. Normalise ``h`` with ``ffn_norm``, apply the feed-forward, and add
             the result to ``h``; return it.
        """
        raise NotImplementedError("tiny_lm: write DecoderBlock.forward")


class TinyLM(nn.Module):
    """Token ids ``(B, T)`` -> logits ``(B, T, vocab_size)``.

    Attributes and submodules (the contract's names):
      - ``vocab_size``, ``max_len``: the arguments (``generate`` reads ``max_len``)
      - ``tok_emb``: ``nn.Embedding(vocab_size, d_model)``
      - ``blocks``: ``nn.ModuleList`` of ``n_layers`` ``DecoderBlock(d_model, n_heads, n_kv_heads, d_ff)``
      - ``norm``: ``RMSNorm(d_model)``, the final norm
      - ``head``: ``nn.Linear(d_model, vocab_size, bias=False)``, a weight of its own (not tied to ``tok_emb``)
      - the RoPE tables ``rope_angles(max_len, d_model // n_heads, rope_base)``
        as two non-persistent buffers (any names)

    The state dict holds exactly ``tok_emb.weight``, ``blocks.*``, ``norm.weight``
    and ``head.weight``.
    """

    def __init__(self, vocab_size: int, max_len: int, d_model: int, n_heads: int, n_kv_heads: int,
                 n_layers: int, d_ff: int, rope_base: float = 10000.0) -> None:
        """Create the layers and the RoPE tables.

        TODO (tiny_lm), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Store ``vocab_size`` and ``max_len``.
          3. Create ``tok_emb``, the ``n_layers`` blocks (in an ``nn.ModuleList``,
             so that their parameters are the model's), ``norm`` and ``head``.
          4. Compute the cos and sin tables for one head's width and register
             each as a buffer with ``persistent=False``.
        """
        super().__init__()
        raise NotImplementedError("tiny_lm: write TinyLM.__init__")

    def new_caches(self) -> list[KVCache]:
        """One new, empty ``KVCache`` per block, in the blocks' order.

        TODO (tiny_lm), in words:
          1. Return a list with a *different* ``KVCache`` object for each block
             (a list repeated with ``*`` would hold one object many times).
        """
        raise NotImplementedError("tiny_lm: write TinyLM.new_caches")

    def forward(self, idx: Tensor, caches: list[KVCache] | None = None) -> Tensor:
        """``idx`` ``(B, T)`` int64 -> logits ``(B, T, vocab_size)``.

        Without ``caches``: positions ``0 .. T-1``, causal. With ``caches`` (as
        ``new_caches()`` makes them): ``idx`` holds the ``T`` positions after the
        ``len(caches[0])`` cached ones. Raises ``ValueError`` (graded) if a
        position would reach ``max_len`` (``start + T > max_len``).

        TODO (tiny_lm), in words:
          1. Find where the new positions start (0 without caches, else the
             length of the first cache) and raise ``ValueError`` if the last one
             would be ``max_len`` or more.
          2. Embed the tokens.
          3. Choose the mask: a causal one of ``T`` positions without caches,
             ``None`` with them.
          4. Run every block in order, each with the mask, the RoPE tables
             ``(cos, sin)`` and its own cache (``caches[i]``, or None).
          5. Apply the final norm, then the head; return the logits.
        """
        raise NotImplementedError("tiny_lm: write TinyLM.forward")
