"""Alternative: patchify with reshape + permute."""
from __future__ import annotations

import torch.nn as nn
from torch import Tensor


def patchify(images: Tensor, patch_size: int) -> Tensor:
    b, c, h, w = images.shape
    p = patch_size
    if h % p or w % p:
        raise ValueError(f"H={h}, W={w} not divisible by patch size {p}")
    x = images.reshape(b, c, h // p, p, w // p, p)
    x = x.permute(0, 2, 4, 1, 3, 5)  # b, gh, gw, c, p, p
    return x.reshape(b, (h // p) * (w // p), c * p * p)


class PatchEmbedding(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, d_model: int) -> None:
        super().__init__()
        self.img_size = img_size
        self.patch_size = patch_size
        self.in_channels = in_channels
        self.num_patches = (img_size // patch_size) ** 2
        self.proj = nn.Linear(in_channels * patch_size**2, d_model)

    def forward(self, images: Tensor) -> Tensor:
        if list(images.shape[1:]) != [self.in_channels, self.img_size, self.img_size] or images.dim() != 4:
            raise ValueError(f"bad image shape {tuple(images.shape)}")
        return self.proj(patchify(images, self.patch_size))
