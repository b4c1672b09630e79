"""The known mistakes of `qkv_projection` (Q, K, V projections): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised
from .general import linear_width_mistakes, same_output


def linear(x: Tensor, state: dict[str, Tensor], layer: str, *, bias: bool = True) -> Tensor:
    b = state.get(f"{layer}.bias") if bias else None
    return F.linear(x.double(), state[f"{layer}.weight"].double(), None if b is None else b.double())


QKV_LAYERS = ("w_q", "w_k", "w_v", "out_proj")
WRONG_LAYER = mistake("qkv_projection", "wrong_layer",
                      "your {name} equals {layer}(x): {name} must come from its own layer {own}",
                      lambda x, state, layer: linear(x, state, layer))
QKV_ORDER = recognised("qkv_projection", "returned_order",
                       "your project_qkv returns the three projections in the order ({order}): it returns "
                       "(q, k, v), in that order")


def returned_order(result: tuple, expected: dict[str, Tensor]) -> str | None:
    """The order ("q, v, k") in which `result` holds each of the `expected` projections q, k, v once, where it
    is not (q, k, v); None where it holds something else."""
    names = []
    for out in result:
        same = [name for name, want in expected.items() if same_output(out, want)]
        if len(same) != 1:
            return None
        names += same
    return ", ".join(names) if sorted(names) == ["k", "q", "v"] and names != ["q", "k", "v"] else None


NO_BIAS_APPLIED = mistake("qkv_projection", "bias_not_applied",
                          "your {name} is x @ {own}.weight^T without the bias: call the layer, {own}(x)",
                          lambda x, state, layer: linear(x, state, layer, bias=False))
OUT_PROJ_NAMED_W_O = mistake("qkv_projection", "out_proj_named_w_o",
                             "you named the output projection w_o; the contract calls it out_proj",
                             lambda expected: {k.replace("out_proj.", "w_o.") for k in expected})
LAYER_WITHOUT_BIAS = mistake("qkv_projection", "layer_without_bias",
                             "{layer} has no bias: create it with nn.Linear(d_model, d_model, bias=bias)",
                             lambda expected, layer: expected - {f"{layer}.bias"})
LAYER_WITH_BIAS = mistake("qkv_projection", "layer_with_bias",
                          "{layer} has a bias although bias=False: pass bias=bias when you create {layer}",
                          lambda expected, layer: expected | {f"{layer}.bias"})
BIAS_DEFAULT_FALSE = recognised("qkv_projection", "bias_default_false",
                                "your MultiHeadAttention's bias defaults to False: the contract's default is "
                                "bias=True, __init__(d_model, n_heads, bias=True) (bias-free layers are LLaMA's habit)")
WEIGHT_NOT_TRANSPOSED = mistake("qkv_projection", "weight_not_transposed",
                                "your {name} is x @ {own}.weight, without the transpose: nn.Linear stores its weight as "
                                "(out_features, in_features), so the layer computes x @ weight.T + bias; call it, {own}(x)",
                                lambda x, state, layer: x.double() @ state[f"{layer}.weight"].double()
                                + state.get(f"{layer}.bias", torch.zeros(())).double())
# Scaled in the projection (fairseq's q * scaling): attention_scores divides by √d_k again.
PROJECTION_SCALED = (
    mistake("qkv_projection", "projection_divided",
            "your {name} is {own}(x) divided by √d_k: project_qkv returns the plain projections, and the scores "
            "alone are divided by √d_k (in attention_scores)",
            lambda x, state, layer, d_k: linear(x, state, layer) / math.sqrt(d_k)),
    mistake("qkv_projection", "projection_multiplied",
            "your {name} is {own}(x) multiplied by √d_k: project_qkv returns the plain projections, and the "
            "scores alone are divided by √d_k (in attention_scores)",
            lambda x, state, layer, d_k: linear(x, state, layer) * math.sqrt(d_k)),
)
FLOAT_D_K = mistake("qkv_projection", "float_d_k", "your d_k is d_model / n_heads, a float: use // so it is an int",
                    lambda d_model, n_heads: d_model / n_heads)
# d_k another size of the layer than one head's width (d_model itself, or the number of heads)
D_K_SIZE = mistake("qkv_projection", "d_k_size",
                   "your d_k is {size}: it is the width of one head, d_model // n_heads", dict())
UNPROJECTED = mistake("qkv_projection", "unprojected",
                      "your {name} is x itself, not projected: {name} = {own}(x)", lambda x: x.double())


def projection_mistakes(x: Tensor, state: dict[str, Tensor], name: str, n_heads: int) -> Mistakes:
    """For q, k or v of project_qkv of MultiHeadAttention(d_model, n_heads): the wrong layer, the right one without
    its bias or its weight's transpose, or scaled by √d_k."""
    own = f"w_{name}"
    mistakes: Mistakes = bind([UNPROJECTED], x, name=name, own=own)
    for layer in QKV_LAYERS:
        if layer != own:
            mistakes.update(bind([WRONG_LAYER], x, state, layer, name=name, layer=layer, own=own))
    if f"{own}.bias" in state:
        mistakes.update(bind([NO_BIAS_APPLIED], x, state, own, name=name, own=own))
    if state[f"{own}.weight"].shape[0] == state[f"{own}.weight"].shape[1]:
        mistakes.update(bind([WEIGHT_NOT_TRANSPOSED], x, state, own, name=name, own=own))
    d_k = x.shape[-1] // n_heads
    if d_k > 1:
        mistakes.update(bind(PROJECTION_SCALED, x, state, own, d_k, name=name, own=own))
    return mistakes


def state_dict_key_mistakes(expected: set[str], bias: bool) -> Mistakes:
    mistakes = bind([OUT_PROJ_NAMED_W_O], expected)
    for layer in QKV_LAYERS:
        mistakes.update(bind([LAYER_WITHOUT_BIAS if bias else LAYER_WITH_BIAS], expected, layer, layer=layer))
    return mistakes


def bias_default_mistakes(without_bias: set[str]) -> Mistakes:
    """For the state dict of a MultiHeadAttention made without `bias=`: the keys of one made bias-free."""
    return {BIAS_DEFAULT_FALSE: without_bias}


def d_k_mistakes(d_model: int, n_heads: int) -> Mistakes:
    sizes = {"d_model": d_model, "n_heads": n_heads}
    return {**bind([FLOAT_D_K], d_model, n_heads),
            **{D_K_SIZE.text(size=size): (lambda v=value: v) for size, value in sizes.items()
               if value != d_model // n_heads and list(sizes.values()).count(value) == 1}}


def qkv_width_mistakes(key: str, d_model: int, n_heads: int) -> Mistakes:
    """For the shape of state_dict()[key] of MultiHeadAttention(d_model, n_heads): a projection's weight sized
    with one head's width d_k, or n_heads, where d_model is meant (LINEAR_WIDTHS)."""
    if not key.endswith(".weight"):
        return {}
    widths = {"d_model": d_model, "d_k": d_model // n_heads, "n_heads": n_heads}
    return linear_width_mistakes(key.removesuffix(".weight"), ("d_model", "d_model"), widths)
