"""Scaled dot-product attention and multi-head attention.

Shapes used throughout (batch first):

- ``B``  batch size
- ``T``  sequence length (``Tq`` queries, ``Tk`` keys/values when they differ)
- ``D``  model width, ``d_model``
- ``H``  number of heads
- ``Dh`` width of one head, ``D // H`` (also called ``d_k``)

Attention in one sentence: every position builds a *query* ("what am I looking
for?"), a *key* ("what do I contain?") and a *value* ("what do I hand over if
chosen?"); a query is compared with every key, the comparisons are turned into
weights that sum to 1 with a softmax, and the output is the weighted average of
the values:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Components in this file (``python -m grader check COMPONENT``):

- ``head_splitting``: ``split_heads``, ``merge_heads``
- ``scaling``: ``attention_scores``
- ``masking``: ``causal_mask``, ``apply_mask``
- ``multi_head_attention``: ``scaled_dot_product_attention``,
  ``MultiHeadAttention.forward`` without a cache
- ``qkv_projection``: ``MultiHeadAttention.__init__``, ``MultiHeadAttention.project_qkv``
- ``kv_cache``: the cache branch of ``MultiHeadAttention.forward``

Conventions: a mask is a bool tensor in which **True means "may attend"** (as
in ``torch.nn.functional.scaled_dot_product_attention``). Never modify an
input in place. Outputs keep the dtype of the inputs (float32 and float64 are
graded). Bad arguments raise ``ValueError`` with a message naming the problem.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch
import torch.nn as nn
from torch import Tensor

if TYPE_CHECKING:  # imported for type hints only, so a broken kv_cache.py cannot break this file
    from .kv_cache import KVCache


# ---------------------------------------------------------------------------
# head_splitting
# ---------------------------------------------------------------------------
def split_heads(x: Tensor, n_heads: int) -> Tensor:
    """Split the model dimension into heads: ``(B, T, D)`` -> ``(B, H, T, Dh)``.

    Why heads? One attention over all ``D`` features can only produce one
    weighting of the positions per query. Splitting ``D`` into ``H`` smaller
    subspaces of width ``Dh = D // H`` lets each head attend to something
    different (a nearby word, the subject of the sentence, a matching bracket)
    for the same total cost: ``H`` heads of width ``Dh`` do as much arithmetic as
    one head of width ``D``.

    Layout (graded exactly): head ``h`` holds the consecutive features
    ``h*Dh`` to ``(h+1)*Dh - 1`` of ``x``, so
    ``split_heads(x, H)[b, h, t, i] == x[b, t, h*Dh + i]``.

    Raises ``ValueError`` if ``D`` is not divisible by ``n_heads`` (graded).

    TODO (head_splitting), in words:
      1. Read ``B, T, D`` from the shape of ``x``; if ``D % n_heads != 0`` raise
         ``ValueError`` saying that ``d_model`` is not divisible by ``n_heads``.
      2. View the last dimension as ``(H, Dh)``, giving ``(B, T, H, Dh)``.
      3. Swap the ``T`` and ``H`` dimensions so heads come before the sequence.
    (``view``/``reshape`` plus ``transpose`` work; so does ``einops.rearrange``
    if you prefer it.)
    """
    raise NotImplementedError("head_splitting: write split_heads")


def merge_heads(x: Tensor) -> Tensor:
    """Join the heads back together: ``(B, H, T, Dh)`` -> ``(B, T, H*Dh)``.

    The exact inverse of ``split_heads``: ``merge_heads(split_heads(x, H))``
    equals ``x``.

    TODO (head_splitting), in words:
      1. Swap ``H`` and ``T`` back, giving ``(B, T, H, Dh)``.
      2. Join the last two dimensions into one of width ``H*Dh``. After a
         transpose the tensor is no longer contiguous, so ``view`` alone fails:
         use ``reshape`` (or ``.contiguous()`` first).
    """
    raise NotImplementedError("head_splitting: write merge_heads")


# ---------------------------------------------------------------------------
# scaling
# ---------------------------------------------------------------------------
def attention_scores(q: Tensor, k: Tensor) -> Tensor:
    """Scaled similarity of every query with every key.

    ``q`` is ``(..., Tq, d)``, ``k`` is ``(..., Tk, d)`` with the same leading
    dimensions (for example ``(B, H)``); the result is ``(..., Tq, Tk)`` with
    ``scores[..., i, j] = (q_i . k_j) / sqrt(d)``, where ``d`` is the last
    dimension of ``q``.

    Why divide by ``sqrt(d)``? If the entries of ``q`` and ``k`` have mean 0 and
    variance 1, their dot product is a sum of ``d`` such products and has
    variance ``d``: the wider the head, the larger the scores. Large scores push
    the softmax into saturation (almost all weight on one key), where its
    gradients vanish and learning stalls. Dividing by ``sqrt(d)`` brings the
    variance back to 1, whatever the head width.

    TODO (scaling), in words:
      1. Transpose the last two dimensions of ``k`` so it is ``(..., d, Tk)``
         (not ``k.T``, which reverses *all* dimensions).
      2. Multiply ``q`` by it with a batched matrix product.
      3. Divide by the square root of ``d``, the size of the last dimension of ``q``.
    """
    raise NotImplementedError("scaling: write attention_scores")


# ---------------------------------------------------------------------------
# masking
# ---------------------------------------------------------------------------
def causal_mask(q_len: int, k_len: int | None = None, *, device=None) -> Tensor:
    """Bool ``(q_len, k_len)`` mask that stops a position from seeing the future.

    ``True`` means "may attend". ``k_len`` defaults to ``q_len``. The queries are
    the *last* ``q_len`` of the ``k_len`` positions (this is what happens when
    decoding with a KV cache: the keys include everything cached before), so

        mask[i, j] is True exactly when j <= i + (k_len - q_len)

    With ``q_len == k_len == 4`` it is lower triangular::

        [[T, F, F, F],
         [T, T, F, F],
         [T, T, T, F],
         [T, T, T, T]]

    and with ``q_len = 2, k_len = 4`` the two queries are positions 2 and 3::

        [[T, T, T, F],
         [T, T, T, T]]

    The tensor is created on ``device`` (``None``: the default device).
    Raises ``ValueError`` if ``k_len < q_len`` (graded).

    TODO (masking), in words:
      1. Default ``k_len`` to ``q_len``; raise ``ValueError`` if ``k_len < q_len``.
      2. Build a bool ``(q_len, k_len)`` tensor on ``device`` that is True on and
         below the diagonal shifted right by ``k_len - q_len`` (a lower
         triangle with an offset, or a comparison of a column index ``j`` with
         a row index ``i``).
    """
    raise NotImplementedError("masking: write causal_mask")


def apply_mask(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Hide the positions where ``mask`` is False before the softmax.

    ``mask`` is bool and broadcastable to ``scores`` (for example ``(Tq, Tk)``
    against ``(B, H, Tq, Tk)``); ``True`` means "may attend". Where it is False,
    the result holds a very large negative number; elsewhere the scores are
    unchanged. ``mask=None`` returns the scores unchanged.

    Why a large negative number and not 0? A score of 0 still gets weight
    ``exp(0) / sum`` after the softmax. ``exp(-inf)`` is exactly 0, so a masked
    score of ``-inf`` (or the dtype's lowest finite value,
    ``torch.finfo(scores.dtype).min``, or a constant like ``-1e9``) gives that
    position a weight of exactly 0 whatever the other scores are. Any of those
    is accepted.

    Return a new tensor; do not modify ``scores`` in place (``masked_fill``
    without the trailing underscore returns a copy).

    TODO (masking), in words:
      1. If ``mask`` is None, return ``scores`` as they are.
      2. Otherwise fill the positions where the mask is *False* (its logical
         negation) with a large negative value, keeping ``scores``' dtype.
    """
    raise NotImplementedError("masking: write apply_mask")


# ---------------------------------------------------------------------------
# multi_head_attention
# ---------------------------------------------------------------------------
def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None
) -> tuple[Tensor, Tensor]:
    """``softmax(q k^T / sqrt(d)) v``, returning both the output and the weights.

    Shapes: ``q (..., Tq, d)``, ``k (..., Tk, d)``, ``v (..., Tk, dv)`` with the
    same leading dimensions; ``mask`` (bool, True = may attend) broadcastable to
    ``(..., Tq, Tk)`` or None.

    Returns ``(out, weights)``:
      - ``weights = softmax(apply_mask(attention_scores(q, k), mask), dim=-1)``,
        shape ``(..., Tq, Tk)``; each row sums to 1 (over the keys).
      - ``out = weights @ v``, shape ``(..., Tq, dv)``: for each query, the
        weighted average of the values.

    TODO (multi_head_attention), in words:
      1. Compute the scaled scores with ``attention_scores``.
      2. Mask them with ``apply_mask``.
      3. Softmax over the last dimension (the keys), not over the queries.
      4. Multiply the weights by ``v``; return the output and the weights.
    """
    raise NotImplementedError("multi_head_attention: write scaled_dot_product_attention")


class MultiHeadAttention(nn.Module):
    """Multi-head self-attention over ``(B, T, D)`` inputs, with an optional KV cache.

    The data flow of ``forward``::

        x (B, T, D) --w_q, w_k, w_v--> q, k, v (B, T, D)
                    --split_heads----> (B, H, T, Dh) each
                    --scaled_dot_product_attention--> (B, H, T, Dh)
                    --merge_heads----> (B, T, D)
                    --out_proj-------> (B, T, D)

    Attributes (names are part of the contract and graded):
      - ``d_model``, ``n_heads``, ``d_k`` (``= d_model // n_heads``)
      - ``w_q``, ``w_k``, ``w_v``, ``out_proj``: four
        ``nn.Linear(d_model, d_model, bias=bias)``. A state dict therefore has
        exactly the keys ``w_q.weight, w_q.bias, w_k.weight, w_k.bias,
        w_v.weight, w_v.bias, out_proj.weight, out_proj.bias`` (no biases when
        ``bias=False``). Create no other parameters or submodules.
      - ``last_attention``: None until the first call of ``forward``, then the
        latest call's attention weights ``(B, H, Tq, Tk)``, detached.
    """

    def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:
        """Create the projections (component ``qkv_projection``).

        Raises ``ValueError`` if ``d_model`` is not divisible by ``n_heads`` (graded).

        TODO (qkv_projection), in words:
          1. Keep the ``super().__init__()`` call below first: ``nn.Module``
             must be set up before any layer is assigned.
          2. If ``d_model % n_heads != 0``, raise ``ValueError``.
          3. Store ``d_model``, ``n_heads`` and ``d_k = d_model // n_heads``.
          4. Create ``w_q``, ``w_k``, ``w_v`` and ``out_proj``, each a linear
             layer from ``d_model`` to ``d_model`` with ``bias=bias``.
          5. Set ``last_attention`` to None.
        """
        super().__init__()
        raise NotImplementedError("qkv_projection: write MultiHeadAttention.__init__")

    def project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Project ``x (B, T, D)`` to queries, keys and values, each ``(B, T, D)``.

        The three are ``w_q(x)``, ``w_k(x)``, ``w_v(x)``: the same input read in
        three different ways, so that "what I look for" (query) can differ from
        "what I offer to be found by" (key) and "what I hand over" (value).

        TODO (qkv_projection), in words:
          1. Apply each of the three projections to ``x``.
          2. Return them as a tuple in the order ``(q, k, v)``.
        """
        raise NotImplementedError("qkv_projection: write MultiHeadAttention.project_qkv")

    def forward(
        self, x: Tensor, mask: Tensor | None = None, cache: KVCache | None = None
    ) -> Tensor:
        """Self-attention of ``x (B, T, D)``; returns ``(B, T, D)``.

        ``mask`` (bool, True = may attend) is broadcastable to ``(B, H, T, T)``:
        ``(T, T)``, ``(B, 1, T, T)`` or ``(B, H, T, T)``; None attends everywhere.

        With a ``KVCache`` (component ``kv_cache``): ``x`` holds the *next* ``T``
        positions of a sequence whose earlier positions are already in the
        cache. Their keys and values (after projection and ``split_heads``) are
        appended to the cache with ``cache.update(k, v)``, which returns the keys
        and values of every position so far, ``(B, H, Tk, Dh)``. The new queries
        attend to every cached position and causally among themselves, which is
        exactly ``causal_mask(T, Tk)``. A cache implies its own mask, so passing
        a ``mask`` together with a ``cache`` raises ``ValueError`` (graded).

        In both cases store the attention weights of this call, detached, in
        ``self.last_attention`` (``(B, H, Tq, Tk)``).

        TODO (multi_head_attention), in words:
          1. Project ``x`` with ``project_qkv``.
          2. Split each of ``q``, ``k``, ``v`` into heads with ``split_heads``.
          3. (kv_cache, see below) if a cache is given, handle it here.
          4. Run ``scaled_dot_product_attention`` with the mask.
          5. Store the weights, detached, in ``self.last_attention``.
          6. Merge the heads with ``merge_heads`` and apply ``out_proj``.

        TODO (kv_cache), the cache branch, step 3 above, in words:
          a. If ``mask`` is not None as well, raise ``ValueError``.
          b. Replace ``k`` and ``v`` with what ``cache.update(k, v)`` returns.
          c. Use ``causal_mask(T_new, T_total, device=x.device)`` as the mask.
        """
        raise NotImplementedError(
            "multi_head_attention: write MultiHeadAttention.forward (its cache branch is kv_cache)"
        )
