"""Stand-in for MultiHeadAttention.forward (multi_head_attention and kv_cache), on the implementation's parts."""
from __future__ import annotations

from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


def forward(self, x: Tensor, mask: Tensor | None = None, cache=None) -> Tensor:
    attention = impl.attention
    q, k, v = (attention.split_heads(t, self.n_heads) for t in self.project_qkv(x))
    if cache is not None:
        if mask is not None:
            raise ValueError("a mask cannot be given together with a cache")
        k, v = cache.update(k, v)
        mask = attention.causal_mask(q.shape[-2], k.shape[-2], device=x.device)
    out, weights = attention.scaled_dot_product_attention(q, k, v, mask)
    self.last_attention = weights.detach()
    return self.out_proj(attention.merge_heads(out))
