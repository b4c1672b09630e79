"""Normalisation layers: LayerNorm (component ``layer_norm``) and RMSNorm (``rms_norm``).

A deep network's activations drift in scale from layer to layer. A norm layer
rescales each token's feature vector (the last dimension, ``D``) to a standard
size, then lets the model choose its own scale again through a learned,
per-feature ``weight`` (and, for LayerNorm, a shift ``bias``). Each token is
normalised on its own: nothing is shared across the batch or the sequence,
unlike BatchNorm.

**LayerNorm** (Ba et al., 2016) centres and scales: over the last dimension,

    y = (x - mean) / sqrt(var + eps) * weight + bias

where ``var`` is the *biased* variance, the mean of ``(x - mean) ** 2`` (divide
by ``D``, not ``D - 1``: this is a property of the vector, not an estimate of
a population's). ``eps`` goes *inside* the square root: it keeps a constant
vector (variance 0) from dividing by zero.

**RMSNorm** (Zhang & Sennrich, 2019; used by LLaMA) keeps only the scaling:

    y = x / sqrt(mean(x ** 2) + eps) * weight

Why drop the mean? The paper found that LayerNorm's benefit comes from
re-scaling, not re-centring: dividing by the root mean square alone trains as
well, costs one reduction less, and has no bias. Note that ``mean(x ** 2)`` is
not the variance: no mean is subtracted anywhere, so for an input far from zero
(say ``x = 100 + noise``) RMSNorm and LayerNorm give very different results.

Shapes: both map ``(..., D)`` to ``(..., D)``, any number of leading dimensions.
Write them with tensor operations (``torch.nn.LayerNorm``, ``F.layer_norm``,
``nn.RMSNorm`` and ``F.rms_norm`` are what you are building, so the checks
reject them); ``torch.rsqrt`` is allowed.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


class LayerNorm(nn.Module):
    """Layer normalisation over the last dimension, ``(..., D)`` -> ``(..., D)``.

    Parameters (names are part of the contract: checks load state dicts by them):
      - ``weight``: ``nn.Parameter`` of shape ``(d_model,)``, initialised to ones
      - ``bias``: ``nn.Parameter`` of shape ``(d_model,)``, initialised to zeros

    Nothing else goes in the state dict (keep ``eps`` as a plain attribute).
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        """Create ``weight`` and ``bias``; remember ``eps``.

        TODO (layer_norm), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Store ``eps``.
          3. Create ``weight`` (ones) and ``bias`` (zeros), each of shape
             ``(d_model,)``, wrapped in ``nn.Parameter`` so that they are
             trained and saved.
        """
        super().__init__()
        raise NotImplementedError("layer_norm: write LayerNorm.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last dimension.

        ``x`` is ``(..., D)``; the result has ``x``'s shape and dtype.

        TODO (layer_norm), in words:
          1. Take the mean of ``x`` over the last dimension, keeping that
             dimension (``(..., 1)``) so it broadcasts back over ``x``.
          2. Take the biased variance over the same dimension: the mean of the
             squared deviations (``unbiased=False`` / ``correction=0`` if you
             use ``var``).
          3. Subtract the mean, divide by the square root of ``var + eps``.
          4. Multiply by ``weight`` and add ``bias`` (both ``(D,)``: they
             broadcast over the leading dimensions).
        """
        raise NotImplementedError("layer_norm: write LayerNorm.forward")


class RMSNorm(nn.Module):
    """Root-mean-square normalisation over the last dimension, ``(..., D)`` -> ``(..., D)``.

    Parameters (names are part of the contract):
      - ``weight``: ``nn.Parameter`` of shape ``(d_model,)``, initialised to ones

    No bias, and nothing else in the state dict.
    """

    def __init__(self, d_model: int, eps: float = 1e-5) -> None:
        """Create ``weight``; remember ``eps``.

        TODO (rms_norm), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Store ``eps``.
          3. Create ``weight``, an ``nn.Parameter`` of ones, shape ``(d_model,)``.
        """
        super().__init__()
        raise NotImplementedError("rms_norm: write RMSNorm.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``x / sqrt(mean(x ** 2) + eps) * weight`` over the last dimension.

        ``x`` is ``(..., D)``; the result has ``x``'s shape and dtype.

        TODO (rms_norm), in words:
          1. Square ``x`` and average over the last dimension, keeping it
             (``(..., 1)``). Do not subtract a mean first.
          2. Add ``eps`` and take the reciprocal square root (``torch.rsqrt``).
          3. Multiply ``x`` by it, then by ``weight``.
        """
        raise NotImplementedError("rms_norm: write RMSNorm.forward")
