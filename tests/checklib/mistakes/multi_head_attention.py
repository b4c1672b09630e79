"""The known mistakes of `multi_head_attention` (Multi-head attention): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised, simulated
from .general import besides, mapped
from .qkv_projection import linear


RANDOM_ATTENTION = recognised(
    "multi_head_attention", "random_attention",
    "your attention gives another result on every call with the same inputs: something random runs in it, such "
    "as F.dropout (whose training=True is its default, so it drops in eval mode too); attention here has no "
    "dropout, so remove it")


def changes_between_calls(call: Callable[[], Any], first: Any) -> bool:
    """Whether `call()` gives another tensor than `first`, what the same call gave before (NaN equal to NaN)."""
    second = call()
    return (isinstance(first, Tensor) and isinstance(second, Tensor) and first.shape == second.shape
            and not torch.allclose(first, second, rtol=0.0, atol=0.0, equal_nan=True))


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, *, scale: bool = True, softmax_dim: int = -1,
              mask_mode: str = "fill", swap_qk: bool = False, transpose_weights: bool = False,
              normalise: bool = True, divisor: float | None = None, fill: float = float("-inf"),
              log_weights: bool = False, scale_by_v: bool = False, scale_twice: bool = False,
              keys_from_v: bool = False, values_from_k: bool = False, scores_as_weights: bool = False
              ) -> tuple[Tensor, Tensor]:
    """(out, weights) of scaled dot-product attention in float64, with one mistake switched on (`divisor`:
    the scores divided by it instead of by √d; `fill`: the masked scores' value, -inf or a finite one)."""
    if mask is not None and mask_mode == "fill_weights":  # in the inputs' dtype: what a huge fill becomes there
        weights = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])).softmax(dim=-1)
        weights = torch.where(mask, weights, torch.finfo(weights.dtype).min)
        return (weights @ v).double(), weights.double()
    q, k, v = q.double(), k.double(), v.double()
    if swap_qk:
        q, k = k, q
    if keys_from_v:
        k = v
    if scale_by_v:
        divisor = math.sqrt(v.shape[-1])
    if scale_twice:
        divisor = float(q.shape[-1])
    s = q @ k.transpose(-2, -1) / (divisor if divisor is not None else math.sqrt(q.shape[-1]) if scale else 1.0)
    if mask is not None and mask_mode == "fill":
        s = s.masked_fill(~mask, fill)
    elif mask is not None and mask_mode == "inverted":
        s = s.masked_fill(mask, float("-inf"))
    weights = s.softmax(dim=softmax_dim) if normalise else s.exp()
    if log_weights:
        weights = s.log_softmax(dim=-1)
    if mask is not None and mask_mode == "multiply":
        weights = weights * mask
    out = (weights.transpose(-2, -1) if transpose_weights else weights) @ (k if values_from_k else v)
    return out, s if scores_as_weights else weights


# switches of both attention() and mha(): one mistake that the checks of either can see
SOFTMAX_OVER_QUERIES = mistake(
    "multi_head_attention", "softmax_over_queries",
    "your weights are normalised over the queries (softmax over dim -2) instead of over the keys (dim -1)",
    dict(softmax_dim=-2))
MASK_IGNORED = mistake("multi_head_attention", "mask_ignored",
                       "your attention ignores the mask: the output equals attention with mask=None",
                       dict(mask_mode="ignore"))
SCORES_FROM_V = mistake("multi_head_attention", "scores_from_v",
                        "your scores compare the queries with the values, attention_scores(q, v): they compare them "
                        "with the keys, attention_scores(q, k), and the weights then average v",
                        dict(keys_from_v=True))
# out averaging the keys, weights @ k (a copy-paste of the line above it)
VALUES_FROM_K = mistake("multi_head_attention", "values_from_k",
                        "your output averages the keys, weights @ k: the weights average the values, out = weights @ v",
                        dict(values_from_k=True))
# the weights returned (and kept as last_attention) are the masked scores, the softmax's input
SCORES_AS_WEIGHTS = mistake("multi_head_attention", "scores_as_weights",
                            "the weights you return are the masked scores before the softmax: return the softmax "
                            "of them, the weights that multiply v", dict(scores_as_weights=True))
SDPA_MISTAKES = (
    SOFTMAX_OVER_QUERIES,
    MASK_IGNORED,
    SCORES_FROM_V,
    VALUES_FROM_K,
    SCORES_AS_WEIGHTS,
    mistake("multi_head_attention", "mask_multiplied",
            "you multiplied the weights by the mask after the softmax, so the rows no longer sum to 1: fill the masked "
            "scores with -inf before the softmax", dict(mask_mode="multiply")),
    mistake("multi_head_attention", "weights_not_normalised",
            "your weights are exp(scores) without dividing by their sum: softmax normalises each row so that it "
            "sums to 1", dict(normalise=False)),
    mistake("multi_head_attention", "mask_on_weights",
            "you applied the mask to the weights after the softmax: fill the masked scores with -inf before the "
            "softmax, so that each row's weights sum to 1 over the keys it may attend", dict(mask_mode="fill_weights")),
    mistake("multi_head_attention", "mask_inverted",
            "you used the mask inverted: True means 'may attend', so fill the scores where it is False",
            dict(mask_mode="inverted")),
    mistake("multi_head_attention", "weights_transposed",
            "you multiplied v by the transposed weights (weightsᵀ @ v): out = weights @ v", dict(transpose_weights=True)),
    mistake("multi_head_attention", "q_k_swapped", "your scores are k·qᵀ instead of q·kᵀ (queries and keys swapped)",
            dict(swap_qk=True)),
    mistake("multi_head_attention", "sdpa_unscaled", "your scores are not divided by √d before the softmax",
            dict(scale=False)),
    mistake("multi_head_attention", "sdpa_scaled_twice",
            "your scores are divided by √d twice: attention_scores already divides q·kᵀ by √d, so "
            "scaled_dot_product_attention must not divide them again", dict(scale_twice=True)),
    mistake("multi_head_attention", "log_softmax_weights",
            "your weights are log_softmax(scores), the logs of the weights: the weights are softmax(scores, dim=-1)",
            dict(log_weights=True)),
    mistake("multi_head_attention", "scaled_by_v_width",
            "your scores are divided by √dv, the square root of v's feature size: the scale is √d of q and k, "
            "q.size(-1)", dict(scale_by_v=True)),
)
# A family: the softmax over another axis than the keys, as written (a fixed index from habits with other ranks).
SOFTMAX_AXES = (
    mistake("multi_head_attention", "softmax_dim_0",
            "your weights are a softmax over dim=0, the batch (the queries, for 2-D scores): softmax over the keys, "
            "the last dimension (dim=-1), whatever the rank of the scores", dict(softmax_dim=0)),
    mistake("multi_head_attention", "softmax_dim_1",
            "your weights are a softmax over dim=1, the heads of (B, H, Tq, Tk) scores (the queries of (B, Tq, Tk) "
            "ones): softmax over the keys, the last dimension (dim=-1), whatever the rank of the scores",
            dict(softmax_dim=1)),
    mistake("multi_head_attention", "softmax_dim_2",
            "your weights are a softmax over dim=2, the queries of (B, H, Tq, Tk) scores: softmax over the keys, the "
            "last dimension (dim=-1), whatever the rank of the scores", dict(softmax_dim=2)),
)


def _softmax_axes(simulate: Callable[..., Any], rank: int) -> Mistakes:
    """The SOFTMAX_AXES members that are another axis than the keys on scores of this rank."""
    return simulated([m for m in SOFTMAX_AXES if -rank <= m.model["softmax_dim"] < rank
                      and m.model["softmax_dim"] % rank != rank - 1], simulate)


def _fill_shown(got: Any) -> float:
    """The masked scores' fill that what came back (`got`) shows: where a softmax over another axis than the
    keys meets only masked scores, -inf gives NaN and a finite fill (the dtype's lowest, -1e9; the grader's
    apply_mask) an even spread."""
    return float("-inf") if not isinstance(got, Tensor) or bool(got.isnan().any()) else torch.finfo(torch.float64).min


RESULTS_SWAPPED = mistake("multi_head_attention", "results_swapped",
                          "you returned (weights, out); the contract's order is (out, weights)",
                          lambda q, k, v, mask: attention(q, k, v, mask)[::-1])


def _sdpa_mistakes(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, part: int, got: Any) -> Mistakes:
    """For one part of scaled_dot_product_attention's (out, weights); also a softmax over another axis
    (SOFTMAX_AXES), which says nothing where it is what a named mistake gives."""
    def simulate(**switches: Any) -> Tensor:
        return attention(q, k, v, mask, fill=fill, **switches)[part]

    fill = _fill_shown(got)
    named = {**simulated(SDPA_MISTAKES, simulate),
             **mapped(bind([RESULTS_SWAPPED], q, k, v, mask), lambda result: result[part])}
    return besides(named, _softmax_axes(simulate, q.dim()))


def sdpa_out_mistakes(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, got: Any = None) -> Mistakes:
    """For scaled_dot_product_attention's out (which was `got`)."""
    return _sdpa_mistakes(q, k, v, mask, 0, got)


def sdpa_weights_mistakes(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, got: Any = None) -> Mistakes:
    """For scaled_dot_product_attention's weights (which were `got`)."""
    return _sdpa_mistakes(q, k, v, mask, 1, got)


def mha(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, *, prefix: str = "",
        out_proj: bool = True, causal_default: bool = False, split: str = "right", average_heads: bool = False,
        out_proj_untransposed: bool = False, **attention_kwargs: Any) -> tuple[Tensor, Tensor]:
    """(out, weights (B, H, T, T)) of the contract's MultiHeadAttention in float64, with one mistake switched on."""
    batch, length, d_model = x.shape
    d_head = d_model // n_heads
    q, k, v = (linear(x, state, f"{prefix}w_{n}") for n in "qkv")
    if split == "no_transpose":
        q, k, v = (t.reshape(batch, n_heads, length, d_head) for t in (q, k, v))
    else:
        q, k, v = (t.reshape(batch, length, n_heads, d_head).transpose(1, 2) for t in (q, k, v))
    if mask is None and causal_default:
        mask = torch.ones(length, length, dtype=torch.bool).tril()
    out, weights = attention(q, k, v, mask, **attention_kwargs)
    if split == "no_transpose":
        out = out.reshape(batch, length, d_model)
    else:
        out = out.transpose(1, 2).reshape(batch, length, d_model)
    if out_proj_untransposed:
        out = out @ state[f"{prefix}out_proj.weight"].double() + state[f"{prefix}out_proj.bias"].double()
    elif out_proj:
        out = linear(out, state, f"{prefix}out_proj")
    return out, weights.mean(dim=1) if average_heads else weights


MHA_MISTAKES = (
    mistake("multi_head_attention", "out_proj_missing", "you returned the merged heads without applying out_proj",
            dict(out_proj=False)),
    mistake("multi_head_attention", "causal_by_default",
            "your attention is causal when no mask is given; without a mask every position attends to every other",
            dict(causal_default=True)),
    MASK_IGNORED,
    SCORES_FROM_V,
    VALUES_FROM_K,
    SCORES_AS_WEIGHTS,
    mistake("multi_head_attention", "heads_split_by_reshape",
            "you split the heads with a plain reshape to (B, H, T, Dh), without swapping T and H",
            dict(split="no_transpose")),
    SOFTMAX_OVER_QUERIES,
    mistake("multi_head_attention", "mha_unscaled", "your scores are not divided by √Dh before the softmax",
            dict(scale=False)),
    mistake("multi_head_attention", "weights_averaged",
            "you averaged the weights over the heads; last_attention keeps every head, (B, H, T, T)",
            dict(average_heads=True)),
    mistake("multi_head_attention", "out_proj_untransposed",
            "you multiplied by out_proj.weight without transposing it (x @ W + b): nn.Linear computes x @ W.T + b, "
            "so call the layer, self.out_proj(x)", dict(out_proj_untransposed=True)),
)
ONE_HEAD_KEPT = mistake("multi_head_attention", "one_head_kept",
                        "your last_attention has one head, (B, 1, T, T) (one head picked, or a mean with keepdim): it "
                        "keeps every head's weights, (B, H, T, T)",
                        lambda x, n_heads: torch.Size((x.shape[0], 1, x.shape[1], x.shape[1])))


HEADS_SWAPPED = mistake("multi_head_attention", "heads_swapped",
                        "your MultiHeadAttention splits into d_k = d_model // n_heads heads of n_heads features each: "
                        "split_heads(t, n_heads) takes the number of heads, n_heads, not their width",
                        lambda state, x, mask, n_heads, part: mha(state, x, mask, x.shape[-1] // n_heads)[part])


def _heads_swapped(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, part: int) -> Mistakes:
    """HEADS_SWAPPED where it differs from the right split (d_k != n_heads) and its mask still broadcasts."""
    d_k = x.shape[-1] // n_heads
    if d_k == n_heads or (mask is not None and mask.dim() == 4 and mask.size(1) not in (1, d_k)):
        return {}
    return bind([HEADS_SWAPPED], state, x, mask, n_heads, part)


# A family: the scores divided by another width than the head's.
MHA_DIVISOR = mistake("multi_head_attention", "mha_divisor",
                      "your scores are divided by {divisor} instead of √Dh, the square root of one head's width "
                      "(Dh = d_model // n_heads)", dict())


MHA_SCALED_TWICE = recognised("multi_head_attention", "scaled_twice",
                              "your scores are divided by Dh, which is √Dh twice: scaled in attention_scores and "
                              "again after it (in scaled_dot_product_attention, say), or divided by Dh instead of √Dh; "
                              "divide once, by √Dh (Dh = d_model // n_heads)")


def _mha_divisors(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, part: int) -> Mistakes:
    d_model = x.shape[-1]
    d_head = d_model // n_heads
    if n_heads == 1:  # d_model is Dh
        return {}
    found = {MHA_DIVISOR.text(divisor=words): (lambda value=value: mha(state, x, mask, n_heads, divisor=value)[part])
             for words, value in (("√d_model", math.sqrt(d_model)), ("d_model", float(d_model)))
             if not math.isclose(value, math.sqrt(d_head))}
    if d_head != 1:  # dividing by Dh is dividing by √Dh twice: the two cannot be told apart, and the sentence says both
        found[MHA_SCALED_TWICE] = lambda: mha(state, x, mask, n_heads, divisor=float(d_head))[part]
    return found


def mha_out_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                     got: Any = None) -> Mistakes:
    """For MultiHeadAttention's output (which was `got`); also the scores divided by another width (MHA_DIVISOR)
    and a softmax over another axis (SOFTMAX_AXES)."""
    simulate = lambda **switches: mha(state, x, mask, n_heads, fill=_fill_shown(got), **switches)[0]  # noqa: E731
    return besides({**simulated([m for m in MHA_MISTAKES if "average_heads" not in m.model], simulate),
                    **_heads_swapped(state, x, mask, n_heads, 0)},
                   {**_mha_divisors(state, x, mask, n_heads, 0), **_softmax_axes(simulate, 4)})


def mha_weights_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                         got: Any = None) -> Mistakes:
    """For MultiHeadAttention's weights (which were `got`); also the scores divided by another width
    (MHA_DIVISOR) and a softmax over another axis (SOFTMAX_AXES)."""
    simulate = lambda **switches: mha(state, x, mask, n_heads, fill=_fill_shown(got), **switches)[1]  # noqa: E731
    named = {**simulated([m for m in MHA_MISTAKES if not {"out_proj", "out_proj_untransposed"} & set(m.model)],
                         simulate), **(bind([ONE_HEAD_KEPT], x, n_heads) if n_heads > 1 else {}),
             **_heads_swapped(state, x, mask, n_heads, 1)}
    return besides(named, {**_mha_divisors(state, x, mask, n_heads, 1), **_softmax_axes(simulate, 4)})
