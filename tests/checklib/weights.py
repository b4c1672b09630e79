"""Injected weights (never the defaults) and PyTorch built-ins that carry the same weights."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
from torch import Tensor


def randn(*shape: int, gen: torch.Generator, dtype: torch.dtype = torch.float32, scale: float = 1.0) -> Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float64).mul(scale).to(dtype)


def linear_state(prefix: str, d_in: int, d_out: int, *, gen, dtype, bias: bool = True) -> dict[str, Tensor]:
    state = {f"{prefix}.weight": randn(d_out, d_in, gen=gen, dtype=dtype, scale=1 / math.sqrt(d_in))}
    if bias:
        state[f"{prefix}.bias"] = randn(d_out, gen=gen, dtype=dtype, scale=0.5)
    return state


def layer_norm_state(prefix: str, d: int, *, gen, dtype) -> dict[str, Tensor]:
    return {
        f"{prefix}.weight": 1.0 + randn(d, gen=gen, dtype=dtype, scale=0.3),
        f"{prefix}.bias": randn(d, gen=gen, dtype=dtype, scale=0.3),
    }


def mha_state(d_model: int, *, gen, dtype=torch.float32, bias: bool = True, prefix: str = "") -> dict[str, Tensor]:
    """The contract's MultiHeadAttention state: w_q, w_k, w_v, out_proj."""
    state: dict[str, Tensor] = {}
    for name in ("w_q", "w_k", "w_v", "out_proj"):
        state.update(linear_state(prefix + name, d_model, d_model, gen=gen, dtype=dtype, bias=bias))
    return state


def torch_mha(state: dict[str, Tensor], d_model: int, n_heads: int, *, prefix: str = "") -> nn.MultiheadAttention:
    """nn.MultiheadAttention(batch_first=True) carrying the contract-named weights."""
    dtype = state[prefix + "w_q.weight"].dtype
    bias = prefix + "w_q.bias" in state
    mha = nn.MultiheadAttention(d_model, n_heads, bias=bias, batch_first=True, dtype=dtype)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.cat([state[prefix + f"w_{n}.weight"] for n in "qkv"]))
        mha.out_proj.weight.copy_(state[prefix + "out_proj.weight"])
        if bias:
            mha.in_proj_bias.copy_(torch.cat([state[prefix + f"w_{n}.bias"] for n in "qkv"]))
            mha.out_proj.bias.copy_(state[prefix + "out_proj.bias"])
    return mha.eval()


def block_state(d_model: int, d_ff: int, *, gen, dtype=torch.float32, prefix: str = "") -> dict[str, Tensor]:
    """The contract's TransformerBlock state: attention.*, norm1, norm2, ff.0, ff.2."""
    state = mha_state(d_model, gen=gen, dtype=dtype, prefix=prefix + "attention.")
    state.update(layer_norm_state(prefix + "norm1", d_model, gen=gen, dtype=dtype))
    state.update(layer_norm_state(prefix + "norm2", d_model, gen=gen, dtype=dtype))
    state.update(linear_state(prefix + "ff.0", d_model, d_ff, gen=gen, dtype=dtype))
    state.update(linear_state(prefix + "ff.2", d_ff, d_model, gen=gen, dtype=dtype))
    return state


def torch_encoder_layer(state: dict[str, Tensor], d_model: int, n_heads: int, d_ff: int) -> nn.TransformerEncoderLayer:
    """nn.TransformerEncoderLayer(norm_first=True, relu, dropout=0) with the block's weights."""
    dtype = state["norm1.weight"].dtype
    layer = nn.TransformerEncoderLayer(
        d_model, n_heads, d_ff, dropout=0.0, activation="relu", batch_first=True, norm_first=True, dtype=dtype
    )
    mha = torch_mha(state, d_model, n_heads, prefix="attention.")
    with torch.no_grad():
        layer.self_attn.load_state_dict(mha.state_dict())
        for ours, theirs in (("norm1", "norm1"), ("norm2", "norm2"), ("ff.0", "linear1"), ("ff.2", "linear2")):
            getattr(layer, theirs).weight.copy_(state[f"{ours}.weight"])
            getattr(layer, theirs).bias.copy_(state[f"{ours}.bias"])
    return layer.eval()


def norm_state(d: int, *, gen, dtype=torch.float32, bias: bool = True) -> dict[str, Tensor]:
    """A LayerNorm's (bias=True) or an RMSNorm's state, far from the ones/zeros defaults."""
    state = {"weight": 1.0 + randn(d, gen=gen, dtype=dtype, scale=0.5)}
    if bias:
        state["bias"] = randn(d, gen=gen, dtype=dtype, scale=0.5)
    return state


def swiglu_state(d_model: int, d_ff: int, *, gen, dtype=torch.float32) -> dict[str, Tensor]:
    """The contract's SwiGLU state: bias-free w_gate, w_up (d_ff, d_model) and w_down (d_model, d_ff)."""
    state = linear_state("w_gate", d_model, d_ff, gen=gen, dtype=dtype, bias=False)
    state.update(linear_state("w_up", d_model, d_ff, gen=gen, dtype=dtype, bias=False))
    state.update(linear_state("w_down", d_ff, d_model, gen=gen, dtype=dtype, bias=False))
    return state


def gqa_state(d_model: int, n_heads: int, n_kv_heads: int, *, gen, dtype=torch.float32,
              bias: bool = False) -> dict[str, Tensor]:
    """The contract's GroupedQueryAttention state: w_q, out_proj (D, D); w_k, w_v (n_kv_heads * d_k, D)."""
    d_kv = n_kv_heads * (d_model // n_heads)
    state = linear_state("w_q", d_model, d_model, gen=gen, dtype=dtype, bias=bias)
    state.update(linear_state("w_k", d_model, d_kv, gen=gen, dtype=dtype, bias=bias))
    state.update(linear_state("w_v", d_model, d_kv, gen=gen, dtype=dtype, bias=bias))
    state.update(linear_state("out_proj", d_model, d_model, gen=gen, dtype=dtype, bias=bias))
    return state
