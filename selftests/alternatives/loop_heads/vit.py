"""Alternative: patchify with F.unfold; ViT writes the class token and the patches into a new tensor by index
assignment, runs the blocks by index and normalises the class token only (LayerNorm acts on each token alone)."""
from __future__ import annotations

import torch
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


class ViT(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        from .block import TransformerBlock

        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model) * 0.02)
        self.pos_emb = nn.Parameter(torch.zeros(1, self.patch_embed.num_patches + 1, d_model))
        self.blocks = nn.ModuleList()
        for _ in range(n_layers):
            self.blocks.append(TransformerBlock(d_model, n_heads, d_ff, dropout=dropout))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        tokens = self.patch_embed(images)
        b, n, d = tokens.shape
        x = tokens.new_empty(b, n + 1, d)
        x[:, 0] = self.cls_token[0, 0]
        x[:, 1:] = tokens
        x = x + self.pos_emb
        for i in range(len(self.blocks)):
            x = self.blocks[i](x, None)
        return self.head(self.norm(x[:, 0]))
