"""The Vision Transformer: the patch embedding (component ``patch_embedding``)
and the whole classifier (component ``vit_classifier``, the vision track).

A Vision Transformer treats an image as a sequence: cut it into ``P x P``
patches, flatten each patch into a vector, and project every vector to
``d_model`` with one shared linear layer. From then on the patches are tokens
like words, and the same Transformer blocks apply.

Shapes: images ``(B, C, H, W)``; ``P`` = ``patch_size``; ``N = (H/P) * (W/P)``
patches, each a vector of ``C * P * P`` numbers.

The classifier (``ViT``, at the end of this file) puts the pieces together:

    x = patch_embed(images)                 # (B, N, D): one token per patch
    x = cat([cls, x], dim=1) + pos_emb      # (B, N + 1, D): the class token first, then the positions
    for block in blocks:  x = block(x)      # your TransformerBlock (block.py), no mask
    logits = head(norm(x)[:, 0])            # (B, n_classes): the class token only

**Why a class token.** The model must turn ``N`` patch tokens into one answer.
ViT (Dosovitskiy et al., 2020) borrows BERT's ``[CLS]``: one extra, learned
vector that belongs to no patch, put in front of the sequence. It holds no
pixels of its own, so everything it carries after the blocks it gathered by
attending to the patches; the head reads that token alone. (Averaging the
patch tokens also works, but it is another model, and not the one graded here.)

**Why learned positions.** Attention treats its tokens as a set: move two
patches and, without positions, every token's output moves with them and the
class token's stays the same, so the model could not tell the top of an image
from its bottom. ViT adds one learned vector per position, ``pos_emb``, of
shape ``(1, N + 1, D)`` (a batch of one, broadcast over ``B``). They are
learned rather than sinusoidal because an image is not a 1-d sequence: the
2-d neighbourhood of patch ``n`` is whatever the training finds it to be.

**Position 0.** The class token is *prepended*: it sits at position 0, gets
row 0 of ``pos_emb``, and the head reads ``x[:, 0]``. So the order is: patch
tokens, then the class token in front, then ``pos_emb`` added to all
``N + 1`` tokens (row ``1 + n`` for patch ``n``).

``nn.TransformerEncoder`` and ``nn.TransformerEncoderLayer`` are rejected by
the checks for ``vit_classifier``: use your ``TransformerBlock``.
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
    """Vision Transformer classifier: ``(B, C, img_size, img_size)`` -> ``(B, n_classes)``.

    Attributes (part of the contract, and the names of the state dict the checks load):
      - ``patch_embed``: ``PatchEmbedding(img_size, patch_size, in_channels, d_model)``
      - ``cls_token``: ``nn.Parameter`` of shape ``(1, 1, d_model)``
      - ``pos_emb``: ``nn.Parameter`` of shape ``(1, num_patches + 1, d_model)``
        (an ``nn.Parameter``, not a buffer: the positions are learned)
      - ``blocks``: ``nn.ModuleList`` of ``n_layers`` separate
        ``TransformerBlock(d_model, n_heads, d_ff, dropout)``
      - ``norm``: ``nn.LayerNorm(d_model)``; ``head``: ``nn.Linear(d_model, n_classes)``

    Create no other parameters or submodules.
    """

    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        """TODO (vit_classifier), in words:
          1. Keep the ``super().__init__()`` call below first.
          2. Import ``TransformerBlock`` from ``.block`` *here*, inside ``__init__``
             (the contract asks for it): then ``patchify`` and ``PatchEmbedding``
             still import, and are graded, while block.py is unfinished.
          3. Create ``patch_embed``; its ``num_patches`` tells how many rows
             ``pos_emb`` needs besides the class token's.
          4. Create ``cls_token`` and ``pos_emb`` as parameters of the shapes
             above (zeros, or small random values: the checks load their own).
          5. Create the ``n_layers`` blocks, each a new ``TransformerBlock`` with
             ``dropout`` passed on (its own default is not 0), in an
             ``nn.ModuleList``; a list repeated with ``*`` would hold one block
             many times. Then ``norm`` and ``head``.
        """
        super().__init__()
        raise NotImplementedError("vit_classifier: write ViT.__init__")

    def forward(self, images: Tensor) -> Tensor:
        """``images`` ``(B, in_channels, img_size, img_size)`` -> logits ``(B, n_classes)``.

        TODO (vit_classifier), in words:
          1. Embed the patches: ``(B, N, D)``.
          2. Give every image of the batch the class token (one ``(1, 1, D)``
             parameter made ``(B, 1, D)``, without copying it into a new
             parameter), and put it in front of the patch tokens: ``(B, N + 1, D)``.
          3. Add ``pos_emb`` (it broadcasts over the batch).
          4. Run every block in order, without a mask: every token sees every other.
          5. Apply ``norm``, keep position 0 (the class token) and apply ``head``.
        """
        raise NotImplementedError("vit_classifier: write ViT.forward")
