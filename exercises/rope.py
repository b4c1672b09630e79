"""Rotary position embeddings, RoPE (component ``rope``).

The core track *adds* a sinusoidal vector to each token's embedding, once,
before the first block. RoPE (Su et al., 2021, "RoFormer"; used by LLaMA and
most recent language models) instead *rotates* the queries and keys, inside
every attention layer, by an angle proportional to their position. Values are
not rotated.

Take a head's ``Dh`` features as ``Dh / 2`` pairs, pair ``i`` being the two
**adjacent** features ``(2i, 2i+1)``. At position ``p`` pair ``i`` is turned by
the angle ``p * theta_i``, with one frequency per pair,

    theta_i = base ** (-2i / Dh),    i = 0 .. Dh/2 - 1,   base = 10000

so pair 0 turns by one radian per position and the last pairs barely move. A
turn by the angle ``a`` is the 2-D rotation

    out[2i]   = x[2i] * cos(a) - x[2i+1] * sin(a)
    out[2i+1] = x[2i] * sin(a) + x[2i+1] * cos(a)

Why rotate? Read a pair as the complex number ``z = x[2i] + 1j * x[2i+1]``:
the rotation is ``z * e^(1j * a)``, and a dot product of two vectors is
``Re(sum over pairs of z_q * conj(z_k))``. Rotate a query at position ``m``
and a key at position ``n``:

    Re(sum z_q e^(1j m theta) * conj(z_k e^(1j n theta)))
      = Re(sum z_q * conj(z_k) * e^(1j (m - n) theta))

The absolute positions cancel: the attention score depends on the content and
on the *distance* ``m - n`` only. That is what "relative positions" means, and
it holds at every layer. A rotation also keeps lengths, so the norm of each
pair (and of each vector) is unchanged: RoPE moves information around the
circle without scaling it. At position 0 nothing moves at all.

The pair layout matters. Meta's LLaMA code and the RoFormer paper pair
``(2i, 2i+1)``; Hugging Face's LLaMA and GPT-NeoX pair feature ``i`` with
``i + Dh/2`` (the "rotate_half" trick). Both are valid RoPEs, but they are not
interchangeable: they rotate different features together, so weights trained
with one give garbage with the other. This kit uses the **adjacent** pairs:
features 0, 2, 4, ... are the first of their pair, features 1, 3, 5, ... the
second.

Precision: the angle ``p * theta_i`` grows with the position, and so does its
rounding error, which is an error of that many radians in the rotation. In
float32, as Meta's code computes it, that error stays small; in float16 it
reaches half a radian past position 1024 and a whole one past 2048. Build
the tables in float32 (or float64, then convert to float32); the checks
allow float32's rounding.

Complex numbers (``torch.polar``, ``torch.view_as_complex``), einops and
plain tensor arithmetic are all allowed.
"""
from __future__ import annotations

import torch
from torch import Tensor


def rope_angles(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """The rotation tables ``(cos, sin)``, each float32 ``(max_len, head_dim // 2)``.

    ``cos[p, i] = cos(p * base**(-2i / head_dim))`` and likewise ``sin``, for
    positions ``p = 0 .. max_len - 1`` and pairs ``i = 0 .. head_dim/2 - 1``.
    Row 0 is therefore all ones in ``cos`` and all zeros in ``sin``.

    Raises ``ValueError`` (graded) if ``head_dim`` is odd, or if ``max_len``
    or ``head_dim`` is not positive.

    TODO (rope), in words:
      1. Check the arguments and raise ``ValueError`` as described above.
      2. Compute the ``head_dim / 2`` frequencies, one per pair: ``base``
         raised to a negative exponent that grows with the pair index (mind
         that the exponent counts features, two per pair, over ``head_dim``).
      3. Multiply every position (from 0, as float32, not float16) by every
         frequency: a table of angles ``(max_len, head_dim / 2)``.
      4. Return the cosines and the sines of that table, in this order, as
         float32.
    """
    raise NotImplementedError("rope: write rope_angles")


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None = None) -> Tensor:
    """``x (..., T, Dh)`` (say ``(B, H, T, Dh)``) with every adjacent pair rotated; same shape and dtype.

    ``cos`` and ``sin`` are tables from ``rope_angles``, ``(max_len, Dh // 2)``.
    Row ``t`` of ``x`` sits at position ``positions[t]``: ``positions`` is an
    int64 ``(T,)`` tensor, by default ``0 .. T-1`` (after a KV cache holding
    ``n`` positions, the caller passes ``n .. n + T - 1``). With
    ``c = cos[positions[t], i]`` and ``s = sin[positions[t], i]``:

        out[..., t, 2i]   = x[..., t, 2i] * c - x[..., t, 2i+1] * s
        out[..., t, 2i+1] = x[..., t, 2i] * s + x[..., t, 2i+1] * c

    The result has ``x``'s dtype (float32 tables with a float64 ``x`` give a
    float64 result) and ``x`` itself is left unchanged.

    Raises ``ValueError`` (graded) if ``Dh`` is not twice the tables' width,
    or if a position is outside the tables (negative, or not below their
    length: Python's indexing would quietly wrap a negative one around).

    TODO (rope), in words:
      1. Check that the feature size matches the tables; raise ``ValueError``
         if not.
      2. Use the default positions when none are given; raise ``ValueError``
         if any position is outside the tables.
      3. Look up the rows of ``cos`` and ``sin`` at those positions (one row
         per position of ``x``, broadcasting over the leading dimensions), in
         ``x``'s dtype.
      4. Take the first and the second feature of every adjacent pair.
      5. Rotate each pair with the two formulas above, building new tensors
         (never writing into ``x``).
      6. Put the two rotated features of each pair back side by side, in the
         order ``(2i, 2i+1)``, and return a tensor of ``x``'s shape.
    """
    raise NotImplementedError("rope: write apply_rope")
