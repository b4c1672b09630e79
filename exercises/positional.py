"""Sinusoidal positional encoding (component ``sinusoidal_encoding``).

Why positions at all? Self-attention on its own cannot tell order: it is
*permutation-equivariant*. Shuffle the input positions and the outputs are
shuffled the same way, nothing else changes; to attention, a sequence is a set.
"dog bites man" and "man bites dog" would look alike. So before the first
block we *add* to each token's embedding a vector that depends only on its
position.

The original Transformer uses fixed sines and cosines of geometrically
decreasing frequencies. For a position ``p`` and a pair index ``i``
(``0 <= i < d_model / 2``), with angle ``p / 10000^(2i/d_model)``:

    PE[p, 2i]     = sin(p / 10000^(2i/d_model))
    PE[p, 2i + 1] = cos(p / 10000^(2i/d_model))

Dimensions ``0, 1`` turn fastest (a full turn every ``2*pi`` positions); the
last ones turn so slowly that they barely move over thousands of positions,
like the hands of a clock. The useful property: for a fixed offset ``k``, the
(sin, cos) pair at ``p + k`` is the pair at ``p`` *rotated* by an angle that
depends only on ``k`` (sin(a+b) = sin a cos b + cos a sin b, and so on). So
"k positions further" is a linear map the same at every position, which makes
relative positions easy for the model to learn.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor


def sinusoidal_positional_encoding(max_len: int, d_model: int) -> Tensor:
    """float32 ``(max_len, d_model)`` table of positional encodings, positions from 0.

    ``PE[p, 2i] = sin(p / 10000^(2i/d_model))`` and
    ``PE[p, 2i+1] = cos(p / 10000^(2i/d_model))``: even columns hold sines,
    odd columns cosines, and columns ``2i`` and ``2i+1`` share one frequency.
    Row 0 is therefore ``[0, 1, 0, 1, ...]``.

    The result is always float32, whatever the default dtype. Computing it in
    float32 is fine: the checks allow float32's rounding of the angle.

    Raises ``ValueError`` (graded) if ``d_model`` is odd or if ``max_len`` or
    ``d_model`` is not positive.

    TODO (sinusoidal_encoding), in words:
      1. Check the arguments and raise ``ValueError`` as described above.
      2. Make a column of positions ``0 .. max_len-1`` in float32, shape ``(max_len, 1)``.
      3. Make a row of the ``d_model / 2`` frequencies ``1 / 10000^(2i/d_model)``
         for ``i = 0, 1, ...`` (``exp(-log(10000) * 2i / d_model)`` is the same
         number and a common way to compute it).
      4. Multiply them (broadcasting) into an angle table ``(max_len, d_model/2)``.
      5. Put the sines of the angles in the even columns and the cosines in
         the odd columns of a float32 ``(max_len, d_model)`` tensor; return it.
    """
    raise NotImplementedError("sinusoidal_encoding: write sinusoidal_positional_encoding")
