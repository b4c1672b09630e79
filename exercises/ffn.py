"""The SwiGLU feed-forward network (component ``swiglu``).

The core track's feed-forward network is ``Linear, ReLU, Linear``: widen to
``d_ff``, apply a fixed non-linearity, narrow back. A *gated linear unit*
(Dauphin et al., 2017; Shazeer, 2020, "GLU Variants Improve Transformer") makes
the hidden layer the product of two projections of the same input: one, passed
through a non-linearity, decides how much of the other gets through.

    hidden = silu(w_gate(x)) * w_up(x)        # (..., d_ff), elementwise product
    out    = w_down(hidden)                    # (..., D)

``silu(z) = z * sigmoid(z)`` (also called Swish): smooth, and close to ReLU for
large ``|z|``. Only the *gate* goes through it; the *up* projection stays
linear, which is what makes the unit "gated". LLaMA, PaLM and most recent
language models use this block, with no biases, and pick ``d_ff`` about
``8/3 * d_model`` so that its three matrices cost what the classic two of
``4 * d_model`` did.

The two projections have the same shape, so swapping them, or applying ``silu``
to the wrong one, still runs: only the values (and the checks) tell.
``F.silu`` is allowed.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


class SwiGLU(nn.Module):
    """SwiGLU feed-forward, ``(..., d_model)`` -> ``(..., d_model)``.

    Layers (names are part of the contract: checks load state dicts by them),
    all *without* bias:
      - ``w_gate``: ``nn.Linear(d_model, d_ff)``, the projection that goes through silu
      - ``w_up``: ``nn.Linear(d_model, d_ff)``, the projection it multiplies
      - ``w_down``: ``nn.Linear(d_ff, d_model)``, back to the model's width

    Create no other parameters or submodules.
    """

    def __init__(self, d_model: int, d_ff: int) -> None:
        """Create ``w_gate``, ``w_up`` and ``w_down``.

        TODO (swiglu), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Create the three layers listed in the class docstring, with these
             names and ``bias=False``.
        """
        super().__init__()
        raise NotImplementedError("swiglu: write SwiGLU.__init__")

    def forward(self, x: Tensor) -> Tensor:
        """``w_down(silu(w_gate(x)) * w_up(x))``; ``x`` is ``(..., d_model)``, so is the result.

        TODO (swiglu), in words:
          1. Project ``x`` twice, with ``w_gate`` and with ``w_up`` (each
             ``(..., d_ff)``).
          2. Apply silu to the gate projection only, and multiply it
             elementwise with the up projection.
          3. Project the product back with ``w_down``.
        """
        raise NotImplementedError("swiglu: write SwiGLU.forward")
