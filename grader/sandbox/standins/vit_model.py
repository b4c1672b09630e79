"""Stand-in for vit_classifier: ViT, on the implementation's PatchEmbedding and TransformerBlock."""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class ViT(nn.Module):
    def __init__(self, img_size: int, patch_size: int, in_channels: int, n_classes: int, d_model: int,
                 n_heads: int, n_layers: int, d_ff: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.patch_embed = impl.vit.PatchEmbedding(img_size, patch_size, in_channels, d_model)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos_emb = nn.Parameter(torch.zeros(1, (img_size // patch_size) ** 2 + 1, d_model))
        self.blocks = nn.ModuleList([impl.block.TransformerBlock(d_model, n_heads, d_ff, dropout)
                                     for _ in range(n_layers)])
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, images: Tensor) -> Tensor:
        tokens = self.patch_embed(images)
        x = torch.cat([self.cls_token.expand(tokens.shape[0], 1, tokens.shape[2]), tokens], dim=1) + self.pos_emb
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])
