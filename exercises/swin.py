"""Swin Transformer's shifted windows (components ``swin_windows`` and ``window_attention``).

Window attention (component ``window_attention``: ``WindowAttention`` and
``SwinBlock``). Inside a window of ``ws x ws`` tokens, attention is ordinary
multi-head self-attention over ``N = ws * ws`` tokens, with one addition: a
learned relative position bias. Swin adds no position embedding to the tokens;
instead head ``h`` adds to the score of tokens ``i = (yi, xi)`` and
``j = (yj, xj)`` a number that depends only on their offset
``(yi - yj, xi - xj)``, each offset running from ``-(ws - 1)`` to ``ws - 1``.
Why relative and not absolute: every window is attended with the same weights,
wherever it lies in the image and however the shift cut it, so "token 5 of a
window" means nothing, while "one row up, two columns left" means the same
thing everywhere (and it carries over to larger images and windows at other
places). The ``(2ws - 1) ** 2`` offsets are numbered row offset first::

    index[i, j] = (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1)

(each offset shifted by ``ws - 1`` to start at 0; the stride ``2ws - 1`` is
the number of column offsets, so no two offsets share a row of the table, and
the numbering is Swin's own, which its checkpoints depend on). A ``SwinBlock``
is a pre-norm block like the Transformer's, on a map ``(B, H, W, C)``: the
attention branch rolls the normalised map by ``-shift_size`` (when it is not
0), cuts it into windows, attends inside each with ``shifted_window_mask``,
pastes the windows back and rolls by ``+shift_size``, so that blocks with
``shift_size = 0`` and ``ws // 2`` alternate and information crosses the
window borders.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from .attention import merge_heads, split_heads


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """``(B, H, W, C)`` -> ``(B * nW, ws * ws, C)``."""
    raise NotImplementedError("swin_windows: write window_partition")


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """``(B * nW, ws * ws, C)`` -> ``(B, H, W, C)``."""
    raise NotImplementedError("swin_windows: write window_reverse")


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool ``(nW, ws * ws, ws * ws)``."""
    raise NotImplementedError("swin_windows: write shifted_window_mask")


class WindowAttention(nn.Module):
    """Multi-head self-attention inside each window, with a learned relative position bias.

    ``x (B_, N, C)`` -> ``(B_, N, C)``: ``B_`` windows of ``N = ws * ws`` tokens each
    (row-major inside the window, as ``window_partition`` gives them), ``C = dim``.

    Layers and buffers (names and shapes are part of the contract and graded):
      - ``qkv = nn.Linear(dim, 3 * dim)``: its output is q, k, v one after the
        other (``dim`` features each), each split into ``n_heads`` heads as
        ``split_heads`` does.
      - ``proj = nn.Linear(dim, dim)``, applied to the merged heads.
      - ``relative_position_bias_table = nn.Parameter`` of shape
        ``((2 * ws - 1) ** 2, n_heads)``: row ``r`` holds, for every head, the
        bias of one relative offset (small random values, e.g. ``std=0.02``, to start).
      - ``relative_position_index``: an int64 buffer ``(N, N)`` (register_buffer,
        persistent or not), ``index[i, j]`` as in the module docstring.

    You may call your ``split_heads`` and ``merge_heads`` from attention.py (while
    this component is graded the grader's versions stand in for them). PyTorch's
    ``F.scaled_dot_product_attention`` and ``nn.MultiheadAttention`` are not
    allowed here: the bias and the mask go inside the attention, so you write it.
    """

    def __init__(self, dim: int, window_size: int, n_heads: int) -> None:
        """TODO (window_attention), in words:
          1. Keep the ``super().__init__()`` call below first; store ``dim``,
             ``window_size`` and ``n_heads``.
          2. Create ``qkv`` and ``proj``.
          3. Create the table as an ``nn.Parameter`` of the shape above (a buffer
             would never be learned).
          4. Build the index: number the tokens ``t = 0 .. N - 1`` with
             coordinates ``(t // ws, t % ws)``; for every pair ``(i, j)`` take the
             row offset and the column offset (query minus key), shift each by
             ``ws - 1``, and combine them with the stride ``2ws - 1``. With
             broadcasting this is a difference of a column and a row of
             coordinates; no loop is needed. Register it as a buffer.
        """
        super().__init__()
        raise NotImplementedError("window_attention: write WindowAttention.__init__")

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        """``x (B_, N, C)``, optional bool ``mask (nW, N, N)`` -> ``(B_, N, C)``.

        ``B_`` is a multiple of ``nW``: the windows of one image come one after
        the other, image after image, so window ``b`` uses ``mask[b % nW]``
        (not ``mask[b // B]``). Where the mask is False, the pair gets no weight
        (``-inf`` before the softmax; a constant at or below ``-1e9``, or Swin's
        own float mask of ``0`` and ``-100`` added to the scores, also pass).

        TODO (window_attention), in words:
          1. Apply ``qkv`` and cut its output into q, k and v (in that order);
             split each into heads: ``(B_, n_heads, N, C / n_heads)``.
          2. Scores: q times k transposed, divided by the square root of the
             width of one head, ``C / n_heads`` (what each head's dot product
             sums over), not of ``C``.
          3. Gather the bias: indexing the table with the index gives
             ``(N, N, n_heads)``; move the heads to the front (a permute, not a
             reshape, which would mix the heads up) and add it to every
             window's scores.
          4. With a mask: view the scores as ``(B_ // nW, nW, n_heads, N, N)`` so
             that the window axis lines up with the mask's, and fill the pairs
             where it is False (the bool mask is not a number to add).
          5. Softmax over the keys, times v, merge the heads, apply ``proj``.
        """
        raise NotImplementedError("window_attention: write WindowAttention.forward")


class SwinBlock(nn.Module):
    """(Shifted) window attention and an MLP, each pre-norm with a residual; ``(B, H, W, C)`` -> ``(B, H, W, C)``.

    Layers (names are part of the contract and graded): ``norm1``, ``norm2 =
    nn.LayerNorm(dim)``, ``attn = WindowAttention(dim, window_size, n_heads)``,
    ``mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden,
    dim))`` with ``hidden = int(dim * mlp_ratio)``.

    The forward, for ``s = shift_size``::

        y = norm1(x)
        y = roll(y, -s)                  # only when s > 0, along H and W
        y = window_reverse(attn(window_partition(y), mask), ...)
        y = roll(y, +s)                  # back where it came from
        x = x + y                        # the residual adds to x, not to norm1(x)
        return x + mlp(norm2(x))

    Rolling by ``-s`` moves the window grid by ``s`` pixels: the new windows
    straddle the old borders. The pixels that wrap around from the bottom and
    right edges land next to pixels they are not neighbours of in the image, so
    ``shifted_window_mask(H, W, ws, s)`` (no mask when ``s == 0``) keeps them
    apart; it describes the map rolled by ``-s``, which is why the roll must
    go that way first and back by ``+s`` after.
    """

    def __init__(self, dim: int, n_heads: int, window_size: int, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        """TODO (window_attention), in words:
          1. Keep the ``super().__init__()`` call below first; store
             ``window_size`` and ``shift_size``.
          2. Create ``norm1``, ``attn``, ``norm2`` and ``mlp`` as listed above.
        """
        super().__init__()
        raise NotImplementedError("window_attention: write SwinBlock.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``x (B, H, W, C)`` -> ``(B, H, W, C)``.

        Raises ``ValueError`` (graded) if ``H`` or ``W`` is not a multiple of the window.

        TODO (window_attention), in words:
          1. Read ``H`` and ``W``; raise ``ValueError`` unless both are
             multiples of ``window_size``.
          2. Normalise with ``norm1``; if ``shift_size`` is not 0, roll the result
             by ``-shift_size`` along ``H`` and ``W`` (``torch.roll`` with two
             shifts and two dims) and build the mask with ``shifted_window_mask``
             (on ``x``'s device).
          3. Cut into windows with ``window_partition``, attend with ``attn``
             (and the mask), paste back with ``window_reverse``.
          4. Roll back by ``+shift_size`` if you rolled; add the result to ``x``.
          5. Return ``x`` plus ``mlp`` of ``norm2(x)``.
        """
        raise NotImplementedError("window_attention: write SwinBlock.forward")
