"""The Swin Transformer's shifted windows (components ``swin_windows`` and ``window_attention``).

Windows (``swin_windows``: ``window_partition``, ``window_reverse``, ``shifted_window_mask``)
-----------------------------------------------------------------------------------------------

ViT (vit.py) lets every patch attend to every other: for a map of ``h x w``
tokens of ``C`` channels that is ``(h w)^2`` scores per layer, so doubling the
image's side multiplies the attention's cost by 16. Swin (Liu et al., 2021,
"Swin Transformer: Hierarchical Vision Transformer using Shifted Windows")
cuts the map into non-overlapping ``ws x ws`` windows (``ws = 7`` in the
paper) and lets tokens attend only inside their own window. Each token then
meets ``ws^2`` others whatever the image's size: the cost is
``(h w) * ws^2 * C``, linear in the number of tokens (the paper's
``4hwC^2 + 2(hw)^2 C`` for global attention against ``4hwC^2 + 2 M^2 hw C``
for windows of side ``M``).

The maps here are channels-last, ``(B, H, W, C)``, ``H`` and ``W`` multiples
of ``ws``. ``window_partition`` turns them into a batch of windows,
``(B * nW, ws * ws, C)`` with ``nW = (H / ws) * (W / ws)``, ordered:

- by image first: the ``nW`` windows of image 0, then those of image 1, ...
- then row-major over the grid of windows: window ``n`` of an image is at
  window-row ``n // (W / ws)`` and window-column ``n % (W / ws)``;
- and row-major inside a window: token ``t`` is at row ``t // ws`` and
  column ``t % ws`` of its window.

For a 4 x 4 map whose values number the positions row-major and ``ws = 2``::

     0  1 |  2  3        window 0: [ 0,  1,  4,  5]
     4  5 |  6  7        window 1: [ 2,  3,  6,  7]
    ------+------        window 2: [ 8,  9, 12, 13]
     8  9 | 10 11        window 3: [10, 11, 14, 15]
    12 13 | 14 15

``window_reverse`` puts the windows back where they came from; it is the
exact inverse (the attention's output, one vector per token, goes back to the
map). Neither function changes a value: the order is the whole exercise, and
it is invisible in the shapes.

Windows that never exchange information would make every window a separate
image. So every second Swin block *shifts* the grid of windows by
``s = ws // 2`` down and to the right, and the new windows straddle the old
ones. Shifting the grid would leave smaller windows along the edges; Swin
instead rolls the map by ``-s`` along both axes, ``torch.roll(x, (-s, -s),
dims=(1, 2))``, and partitions the rolled map as usual (the block rolls the
result back by ``+s``). The roll moves the first ``s`` rows to the bottom and
the first ``s`` columns to the right: the windows of the last window-row (and
of the last window-column) now hold tokens that were at opposite edges of the
image, and they must not attend to one another. ``shifted_window_mask`` says
which pairs may: True where the two tokens come from the same *region* of the
rolled map. Along the rows the regions are three slices::

    [0, H - ws)        the image's rows s .. H - ws + s - 1, moved up by s: whole windows
    [H - ws, H - s)    the image's last ws - s rows, moved up by s
    [H - s, H)         the image's first s rows, wrapped round to the bottom

and the same three slices of ``W`` cut the columns; a token's label is the
pair (its row's slice, its column's slice), nine regions in all. For
``H = W = 4``, ``ws = 2``, ``s = 1`` the labels and the windows' masks are::

    0 0 | 1 2       window 0: one region, all True
    0 0 | 1 2       window 1: tokens [1, 2, 1, 2]: 0 and 2 together, 1 and 3
    ----+----       window 2: tokens [3, 3, 6, 6]: 0 and 1, 2 and 3
    3 3 | 4 5       window 3: tokens [4, 5, 7, 8]: each token alone
    6 6 | 7 8

(``H - ws`` is a multiple of ``ws``, so the first slice never shares a window
with the other two: two slices, ``[0, H - s)`` and ``[H - s, H)``, give the
same mask. Swin's code uses three; either is right.) With ``s == 0`` nothing
is rolled and every mask is all True. The official code turns the labels into
a float mask of ``0`` and ``-100`` added to the scores; the contract asks for
the bool mask (True = may attend); window attention turns its False entries
into ``-inf`` (or adds the ``-100``).

Reshapes, ``permute``, ``einops.rearrange``, ``unfold``, gathers with index
tensors and loops are all allowed.

Window attention (``window_attention``: ``WindowAttention``, ``SwinBlock``)
--------------------------------------------------------------------------

Inside a window of ``ws x ws`` tokens, attention is ordinary
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
window borders."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor

from .attention import merge_heads, split_heads


def window_partition(x: Tensor, window_size: int) -> Tensor:
    """``(B, H, W, C)`` -> ``(B * nW, ws * ws, C)``, ``nW = (H / ws) * (W / ws)``; dtype and device kept.

    Windows ordered by image, then row-major over the grid of windows; tokens
    row-major inside a window (see the module's docstring). Raises
    ``ValueError`` (graded) if ``H`` or ``W`` is not a multiple of
    ``window_size``.

    TODO (swin_windows), in words:
      1. Read ``B, H, W, C``; raise ``ValueError`` unless ``ws`` divides both
         ``H`` and ``W``.
      2. Split ``H`` into ``(H / ws, ws)`` and ``W`` into ``(W / ws, ws)``:
         a six-dimensional view ``(B, grid row, row in window, grid column,
         column in window, C)``.
      3. Reorder the dimensions so that the two grid dimensions come right
         after ``B`` (grid row first), then the two in-window dimensions (row
         first), then ``C``. Skipping this step still gives the right shape,
         but the "windows" are then strips of consecutive rows.
      4. Flatten ``B`` and the grid into one dimension and the window into
         ``ws * ws`` (the reordered tensor is not contiguous: ``reshape``, or
         ``contiguous()`` before ``view``).
    """
    raise NotImplementedError("swin_windows: write window_partition")


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    """``(B * nW, ws * ws, C)`` -> ``(B, H, W, C)``: the inverse of ``window_partition``.

    ``B`` is ``windows.shape[0] // nW`` with ``nW = (H / ws) * (W / ws)``;
    ``window_reverse(window_partition(x, ws), ws, H, W)`` gives ``x`` back,
    for maps that are not square too.

    TODO (swin_windows), in words:
      1. View the windows as ``(B, grid row, grid column, row in window,
         column in window, C)``: the grid has ``H / ws`` rows and ``W / ws``
         columns (in that order: mixing them up goes unnoticed on square maps
         only).
      2. Undo step 3 of ``window_partition``: bring each in-window dimension
         back beside its grid dimension, (grid row, row in window, grid
         column, column in window).
      3. Flatten the pairs into ``H`` and ``W``: ``(B, H, W, C)``.
    """
    raise NotImplementedError("swin_windows: write window_reverse")


def shifted_window_mask(H: int, W: int, window_size: int, shift_size: int, *, device=None) -> Tensor:
    """Bool ``(nW, ws * ws, ws * ws)``: which tokens of each window of the rolled map may attend to which.

    The map is rolled by ``-shift_size`` along ``H`` and ``W``
    (``torch.roll(x, (-s, -s), dims=(1, 2))``); windows and tokens are
    ordered as ``window_partition`` orders them (the mask is the same for every
    image). ``mask[n, i, j]`` is True when tokens ``i`` and ``j`` of window
    ``n`` carry the same label: the row slice among ``[0, H - ws)``,
    ``[H - ws, H - s)``, ``[H - s, H)`` that holds the token's row, with the
    same slices of ``W`` for its column (module docstring). Every mask is
    symmetric with a True diagonal; with ``shift_size == 0`` all are all True.
    The mask is made on ``device``.

    Raises ``ValueError`` (graded) unless ``0 <= shift_size < window_size``
    and ``window_size`` divides ``H`` and ``W``.

    TODO (swin_windows), in words:
      1. Check the arguments; raise ``ValueError`` as described above.
      2. Make a label map ``(1, H, W, 1)`` on ``device`` (it stands for the
         rolled map: do not roll it again).
      3. Give every region its own number: for each of the three row slices,
         for each of the three column slices, write a new number into that
         block of the map (count all nine blocks, not only the rows).
      4. Cut the label map into windows with your ``window_partition``: one
         row of ``ws * ws`` labels per window.
      5. Compare every token's label with every other token's of the same
         window (broadcast a column of labels against a row of them): True
         where they are equal. (The official code subtracts and keeps
         ``!= 0`` for the ``-100`` entries; that is the opposite of this
         mask.)
    """
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
