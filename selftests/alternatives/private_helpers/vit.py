"""Correct alternative: patchify checks its argument with attention.py's private `_require`; ViT prepends the
class token with einops.repeat in a private helper and adds the positions sliced to the sequence, as
lucidrains/vit-pytorch does."""
from __future__ import annotations

import torch
import torch.nn as nn
from einops import rearrange, repeat
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


def _with_class_token(cls_token: Tensor, tokens: Tensor) -> Tensor:
    """(1, 1, D) and (B, N, D) -> (B, N + 1, D), the class token first."""
    return torch.cat([repeat(cls_token, "() n d -> b n d", b=tokens.shape[0]), tokens], dim=1)


class ViT(nn.Module):
    """Vision Transformer classifier: (B, C, img_size, img_size) images -> (B, n_classes) logits."""

    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        from .block import TransformerBlock

        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.randn(1, 1, d_model))
        self.pos_emb = nn.Parameter(torch.randn(1, self.patch_embed.num_patches + 1, d_model))
        self.blocks = nn.ModuleList([TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        x = _with_class_token(self.cls_token, self.patch_embed(images))
        x = x + self.pos_emb[:, :x.shape[1]]
        for block in self.blocks:
            x = block(x, mask=None)
        return self.head(self.norm(x)[:, 0])
