"""Alternative: patchify with reshape + permute; ViT keeps its blocks in an nn.Sequential (same state dict
keys as a ModuleList), repeats the class token over the batch, and initialises as timm does."""
from __future__ import annotations

import torch
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


class ViT(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        from .block import TransformerBlock

        self.patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model)
        n = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.empty(1, 1, d_model))
        self.pos_emb = nn.Parameter(torch.empty(1, n + 1, d_model))
        nn.init.trunc_normal_(self.pos_emb, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        self.blocks = nn.Sequential(*[TransformerBlock(d_model, n_heads, d_ff, dropout) for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        x = self.patch_embed(images)
        x = torch.cat((self.cls_token.repeat(x.shape[0], 1, 1), x), dim=1)
        x = self.blocks(x + self.pos_emb)
        x = self.norm(x)
        return self.head(x[:, 0, :])
