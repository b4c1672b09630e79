"""Stand-in for MultiHeadAttention.forward (multi_head_attention and kv_cache), on the implementation's
projections and cache, and PyTorch's attention.

Built from the call that course.yml forbids multi_head_attention (`F.scaled_dot_product_attention`; the weights
are the same call with the identity for values): carried out of another component's worker and handed in as
the learner's own forward, it breaks the from-scratch rule.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
    B, T, D = x.shape
    q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in self.project_qkv(x))
    if cache is not None:
        if mask is not None:
            raise ValueError("a mask cannot be given together with a cache")
        k, v = cache.update(k, v)
        mask = torch.ones(T, k.shape[-2], dtype=torch.bool, device=x.device).tril(k.shape[-2] - T)
    eye = torch.eye(k.shape[-2], dtype=q.dtype, device=q.device).expand(B, self.n_heads, -1, -1)
    self.last_attention = F.scaled_dot_product_attention(q, k, eye, attn_mask=mask).detach()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return self.out_proj(out.transpose(1, 2).reshape(B, T, D))
