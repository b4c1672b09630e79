"""Correct alternative: patchify checks its argument with attention.py's private `_require`."""
from __future__ import annotations

import torch.nn as nn
from einops import rearrange
from torch import Tensor

from . import attention


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """(B, C, H, W) -> (B, N, C*P*P): row-major patches, each flattened in (C, P, P) order."""
    height, width = images.shape[-2:]
    attention._require(not (height % patch_size or width % patch_size),
                       f"image size {height}x{width} is not a multiple of patch_size={patch_size}")
    return rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)


class PatchEmbedding(nn.Module):
    """(B, C, img_size, img_size) images -> (B, num_patches, d_model) patch embeddings."""

    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        if img_size % patch_size:
            raise ValueError(f"img_size={img_size} is not a multiple of patch_size={patch_size}")
        self.img_size, self.patch_size, self.in_channels = img_size, patch_size, in_channels
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Linear(in_channels * patch_size**2, d_model)

    def forward(self, images: Tensor) -> Tensor:
        expected = (self.in_channels, self.img_size, self.img_size)
        if images.dim() != 4 or tuple(images.shape[1:]) != expected:
            raise ValueError(f"expected images (B, {', '.join(map(str, expected))}), got {tuple(images.shape)}")
        return self.proj(patchify(images, self.patch_size))
