"""Stand-in for patch_embedding: patchify, PatchEmbedding."""
from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def patchify(images: Tensor, patch_size: int) -> Tensor:
    if images.shape[-2] % patch_size or images.shape[-1] % patch_size:
        raise ValueError(f"image size {tuple(images.shape[-2:])} is not a multiple of {patch_size}")
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


class PatchEmbedding(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Linear(in_channels * patch_size**2, d_model)

    def forward(self, images: Tensor) -> Tensor:
        return self.proj(patchify(images, self.patch_size))
