"""ViT patch embedding (component ``patch_embedding``).

A Vision Transformer treats an image as a sequence: cut it into ``P x P``
patches, flatten each patch into a vector, and project every vector to
``d_model`` with one shared linear layer. From then on the patches are tokens
like words, and the same Transformer blocks apply.

Shapes: images ``(B, C, H, W)``; ``P`` = ``patch_size``; ``N = (H/P) * (W/P)``
patches, each a vector of ``C * P * P`` numbers.
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into flattened patches: ``(B, C, H, W)`` -> ``(B, N, C*P*P)``.

    Order (graded exactly, it decides which weight meets which pixel):
      - Patches are numbered in row-major order: left to right along the top
        row of patches, then the next row down. Patch ``n`` is at patch-row
        ``n // (W/P)`` and patch-column ``n % (W/P)``.
      - Each patch is flattened in ``(C, P, P)`` order: all of channel 0 first
        (its rows top to bottom, each row left to right), then channel 1, ...

    This is exactly the order of ``torch.nn.functional.unfold(images,
    kernel_size=P, stride=P)``, which gives ``(B, C*P*P, N)``.

    Raises ``ValueError`` (graded) if ``H`` or ``W`` is not a multiple of ``P``.

    TODO (patch_embedding), in words:
      1. Read ``H`` and ``W``; raise ``ValueError`` if either is not a multiple of ``P``.
      2. Split ``H`` into ``(H/P, P)`` and ``W`` into ``(W/P, P)``.
      3. Reorder the dimensions so that the two patch-grid dimensions come
         right after ``B`` (row first), followed by ``C`` and the two in-patch
         dimensions (row first).
      4. Flatten the grid dimensions into ``N`` and the rest into ``C*P*P``.
    (Alternatives: ``F.unfold`` followed by a transpose, or ``einops.rearrange``.)
    """
    raise NotImplementedError("patch_embedding: write patchify")


class PatchEmbedding(nn.Module):
    """Images ``(B, C, img_size, img_size)`` -> patch embeddings ``(B, num_patches, d_model)``.

    Attributes (part of the contract):
      - ``num_patches``: ``(img_size // patch_size) ** 2``
      - ``proj``: ``nn.Linear(in_channels * patch_size**2, d_model)``, applied to
        every flattened patch. (A ``Conv2d`` with kernel and stride ``P`` is the
        same operation, but the contract, and the state dict the checks load,
        use a ``Linear`` named ``proj``.)

    Create no other parameters or submodules.
    """

    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        """TODO (patch_embedding), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Remember ``img_size``, ``patch_size`` and ``in_channels``; ``forward``
             needs them to check its input.
          3. Set ``num_patches`` and create ``proj`` as described above.
        """
        super().__init__()
        raise NotImplementedError("patch_embedding: write PatchEmbedding.__init__")

    def forward(self, images: Tensor) -> Tensor:
        """``proj(patchify(images, patch_size))``, shape ``(B, num_patches, d_model)``.

        Raises ``ValueError`` (graded) if ``images`` is not a 4-d batch of
        ``in_channels x img_size x img_size`` images.

        TODO (patch_embedding), in words:
          1. Check that ``images`` is ``(B, in_channels, img_size, img_size)``;
             raise ``ValueError`` naming the expected and actual shape if not.
          2. Cut the images into patches with ``patchify``.
          3. Apply ``proj`` to every patch and return the result.
        """
        raise NotImplementedError("patch_embedding: write PatchEmbedding.forward")


class ViT(nn.Module):
    """Vision Transformer classifier: ``(B, C, img_size, img_size)`` -> ``(B, n_classes)``."""

    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        raise NotImplementedError("vit_classifier: write ViT.__init__")

    def forward(self, images: Tensor) -> Tensor:
        raise NotImplementedError("vit_classifier: write ViT.forward")
