"""Alternative: patchify with F.unfold."""
from __future__ import annotations

import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def patchify(images: Tensor, patch_size: int) -> Tensor:
    h, w = images.shape[-2], images.shape[-1]
    if h % patch_size != 0 or w % patch_size != 0:
        raise ValueError(f"height {h} and width {w} must be multiples of the patch size {patch_size}")
    return F.unfold(images, kernel_size=patch_size, stride=patch_size).transpose(1, 2)


class PatchEmbedding(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.img_size = img_size
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.num_patches = (img_size // patch_size) * (img_size // patch_size)
        self.proj = nn.Linear(in_channels * patch_size * patch_size, d_model)

    def forward(self, images: Tensor) -> Tensor:
        if images.ndim != 4:
            raise ValueError(f"expected a 4-d batch of images, got shape {tuple(images.shape)}")
        _, c, h, w = images.shape
        if c != self.in_channels or h != self.img_size or w != self.img_size:
            raise ValueError(
                f"expected {self.in_channels}x{self.img_size}x{self.img_size} images, got {c}x{h}x{w}"
            )
        return self.proj(patchify(images, self.patch_size))
