"""The known mistakes of `grouped_query_attention` (Grouped-query attention): its entries, simulators and bundles
(see `checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
import re
from typing import Callable

import torch
from torch import Tensor

from ..catalogue import Known, Mistakes, bind, mistake, recognised, simulated, variants
from .general import MISMATCHED_SIZES, besides, biased_layer_mistakes
from .head_splitting import heads
from .qkv_projection import linear


# One model runs the contract's GroupedQueryAttention in float64, with one mistake switched on: a single
# uncached call over x, or one cached call per (start, stop) chunk of x (a fresh cache before the first).

def _rope_rotate(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor) -> Tensor:
    """Adjacent pairs (2i, 2i+1) of x (..., T, Dh) rotated by the angles of `positions`, in float64."""
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    turn = torch.complex(cos[positions].double(), sin[positions].double())
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def gqa_calls(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, *, mask: Tensor | None = None,
              rope: tuple[Tensor, Tensor] | None = None, chunks: list[tuple[int, int]] | None = None,
              variant: str = "", rotated: str = "qk") -> tuple[Tensor, list[tuple[Tensor, Tensor]]]:
    """(the outputs of every call, concatenated along T; the (k, v) each cached call appended to the cache);
    `rotated`: which of q, k, v rope rotates (the contract's: q and k)."""
    batch, length, d_model = x.shape
    d_k, n_rep = d_model // n_heads, n_heads // n_kv_heads
    outputs, appended = [], []
    past: tuple[Tensor, Tensor] | None = None
    for start, stop in chunks or [(0, length)]:
        new = stop - start
        xc = x[:, start:stop]
        q = heads(linear(xc, state, "w_q"), n_heads)
        if variant == "kv_no_transpose":
            k, v = (linear(xc, state, f"w_{n}").reshape(batch, n_kv_heads, new, d_k) for n in "kv")
        else:
            k, v = (heads(linear(xc, state, f"w_{n}"), n_kv_heads) for n in "kv")
        if rope is not None and variant != "no_rope":
            first = 0 if variant == "rope_from_zero" else start
            positions = torch.arange(first, first + new)
            if "q" in rotated:
                q = _rope_rotate(q, *rope, positions)
            if variant not in ("rope_q_only", "rope_after_cache") and "k" in rotated:
                k = _rope_rotate(k, *rope, positions)
            if "v" in rotated:
                v = _rope_rotate(v, *rope, positions)
        if variant == "cache_repeated":
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        attend = mask
        if chunks is not None:
            appended.append((k, v))
            if past is not None:
                k, v = torch.cat([past[0], k], dim=-2), torch.cat([past[1], v], dim=-2)
            past = (k, v)
            total = k.shape[-2]
            offset = 0 if variant == "mask_without_offset" else total - new
            attend = None if variant == "no_mask_with_cache" else torch.ones(new, total, dtype=torch.bool).tril(offset)
            if rope is not None and variant == "rope_twice":
                k = _rope_rotate(k, *rope, torch.arange(total))
        if rope is not None and variant == "rope_after_cache":
            k = _rope_rotate(k, *rope, torch.arange(k.shape[-2]))
        if variant == "tile":
            k, v = k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)
        elif variant != "cache_repeated":
            k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
        scale = math.sqrt(d_model if variant == "scale_d_model" else d_k)
        scores = q @ k.transpose(-2, -1) / scale
        if attend is not None:
            scores = scores.masked_fill(~attend, float("-inf"))
        out = (scores.softmax(dim=-1) @ v).transpose(1, 2).reshape(batch, new, d_model)
        outputs.append(out if variant == "no_out_proj" else linear(out, state, "out_proj"))
    return torch.cat(outputs, dim=1), appended


GQA_MISTAKES = variants("grouped_query_attention", {
    "your query head h uses key/value head h % n_kv_heads (the groups tiled, as x.repeat does): head h "
    "uses h // (n_heads // n_kv_heads), each key/value head repeated n_rep times in a row "
    "(torch.repeat_interleave(x, n_rep, dim=1))": "tile",
    "your scores are divided by √d_model; each head's are divided by √d_k, d_k = d_model // n_heads":
        "scale_d_model",
    "you split the keys and values with a plain reshape to (B, n_kv_heads, T, d_k), without swapping T and "
    "the heads: reshape to (B, T, n_kv_heads, d_k), then transpose(1, 2)": "kv_no_transpose",
    "your forward ignores rope: with rope = (cos, sin) the queries and keys are rotated by apply_rope": "no_rope",
    "you rotate the queries only: rope rotates the keys too, at the same positions": "rope_q_only",
    "your rope positions start at 0 in every call: after a cache they start at len(cache), "
    "positions start .. start + T - 1": "rope_from_zero",
    "your forward rotates the keys that the cache returns a second time: they were rotated before they were "
    "cached, at their own positions": "rope_twice",
    "your causal mask with a cache has no offset (query i sees keys 0 .. i): the new queries are the last T "
    "positions and see every cached key, causal_mask(T_new, T_total)": "mask_without_offset",
    "your cached forward attends without a mask: a chunk of several new positions needs the causal mask over "
    "every cached key and itself, causal_mask(T_new, T_total), so that no query sees the keys after its own":
        "no_mask_with_cache",
    "your forward returns the merged heads without out_proj: the output is out_proj(merge_heads(...))": "no_out_proj",
})
GQA_MISTAKES_BY_VARIANT = {m.name: m for m in GQA_MISTAKES}
# A family: rope applied to another set of q, k, v than the queries and keys (the queries only is rope_q_only).
ROPE_ROTATES = mistake("grouped_query_attention", "rope_rotates",
                       "your forward rotates {which} with apply_rope: rope rotates exactly the queries and the keys, "
                       "q and k at the same positions, and never the values", dict())
ROPE_ROTATED = {"k": "k", "qkv": "q, k, v", "kv": "k, v", "qv": "q, v"}
GQA_ONE_BY_ONE_ROPE = mistake("grouped_query_attention", "rope_not_at_positions",
                              "your queries and keys are not rotated at their positions: either rope is ignored, or "
                              "its positions start at 0 in every call; they are len(cache) .. len(cache) + T - 1",
                              dict(variant="no_rope"))
REPEAT_KV_MISTAKES = (
    mistake("grouped_query_attention", "repeat_kv_tiled",
            "your repeat_kv tiles the heads (x.repeat(1, n_rep, 1, 1), or an expand on a new axis before the heads): "
            "output head j is input head j // n_rep, each head repeated n_rep times in a row",
            lambda x, n_rep: x.repeat(1, n_rep, 1, 1)),
    mistake("grouped_query_attention", "repeat_kv_sequence",
            "your repeat_kv repeats along the sequence (dim 2) instead of the heads (dim 1)",
            lambda x, n_rep: x.repeat_interleave(n_rep, dim=2)),
    mistake("grouped_query_attention", "repeat_kv_features",
            "your repeat_kv repeats along the head features (the last dim) instead of the heads (dim 1)",
            lambda x, n_rep: x.repeat_interleave(n_rep, dim=-1)),
)
GQA_NO_BIASES = mistake("grouped_query_attention", "no_biases",
                        "your layers have no biases although bias=True: pass bias=bias to every nn.Linear",
                        lambda expected: {k for k in expected if k.endswith(".weight")})
GQA_BIASES = mistake("grouped_query_attention", "biases",
                     "your layers have biases although bias=False: pass bias=bias to every nn.Linear",
                     lambda expected: expected | {k.replace(".weight", ".bias") for k in expected})
KV_LAYER_SHAPE_MISTAKES = (
    mistake("grouped_query_attention", "kv_layer_full_width",
            "your {layer} maps d_model to d_model features, as in multi-head attention: it makes only "
            "n_kv_heads heads, nn.Linear(d_model, n_kv_heads * d_k) (the memory saving of grouping)",
            lambda d_model, n_kv_heads, bias: torch.Size((d_model,) if bias else (d_model, d_model))),
    mistake("grouped_query_attention", "kv_layer_one_feature_per_head",
            "your {layer} makes n_kv_heads features, one per head: it makes n_kv_heads heads of d_k features each, "
            "nn.Linear(d_model, n_kv_heads * d_k)",
            lambda d_model, n_kv_heads, bias: torch.Size((n_kv_heads,) if bias else (n_kv_heads, d_model))),
)
CACHE_AFTER_REPEAT = mistake("grouped_query_attention", "cache_after_repeat",
                             "your cache holds the keys and values after repeat_kv, n_heads heads: cache the n_kv_heads "
                             "heads and repeat them only for the attention (the memory saving is the point of grouping)",
                             lambda batch, n_heads, new, d_k: torch.Size((batch, n_heads, new, d_k)))
CACHED_KEYS_NOT_ROTATED = mistake("grouped_query_attention", "cached_keys_not_rotated",
                                  "the keys you cache are not rotated: rotate the new keys with apply_rope at positions "
                                  "start .. start + T - 1 before cache.update, so that the cache holds rotated keys",
                                  dict(variant="no_rope"))


def gqa_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, *, mask: Tensor | None = None,
                 rope: tuple[Tensor, Tensor] | None = None, chunks: list[tuple[int, int]] | None = None,
                 select: Callable[[Tensor], Tensor] = lambda out: out) -> Mistakes:
    """For GroupedQueryAttention's output, seen through `select` (say the chunk of one cached call)."""
    entries = list(GQA_MISTAKES)
    if chunks is not None and all(stop - start == 1 for start, stop in chunks):
        # one position per call: counted from 0, every position is 0, which is no rotation at all
        entries = [m for m in entries if m.name not in ("no_rope", "rope_from_zero")] + [GQA_ONE_BY_ONE_ROPE]
    named = simulated(entries, lambda variant: select(gqa_calls(state, x, n_heads, n_kv_heads, mask=mask, rope=rope,
                                                                chunks=chunks, variant=variant)[0]))
    if rope is None:
        return named
    family = {ROPE_ROTATES.text(which=which): (lambda r=r: select(gqa_calls(
        state, x, n_heads, n_kv_heads, mask=mask, rope=rope, chunks=chunks, rotated=r)[0]))
        for r, which in ROPE_ROTATED.items()}
    return besides(named, family)


GQA_POSITIONS_COUNTED = mistake(
    "grouped_query_attention", "positions_counted_on_module",
    "your GroupedQueryAttention counts the positions it has seen on the module (self.pos += T) instead of reading "
    "len(cache): when the same module decodes two sequences, each with its own cache, a call of one is rotated as "
    "if it went on from the other's last call; the start is len(cache) of the cache passed in",
    lambda state, x, n_heads, n_kv_heads, rope, chunks, counted, select: select(gqa_calls(
        state, x, n_heads, n_kv_heads, rope=(rope[0][counted], rope[1][counted]), chunks=chunks)[0]))


def gqa_again_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, *,
                       rope: tuple[Tensor, Tensor], chunks: list[tuple[int, int]], counted: Tensor,
                       select: Callable[[Tensor], Tensor]) -> Mistakes:
    """For a cached call of GroupedQueryAttention through a module that decodes other sequences between this one's
    calls; `counted[p]`: the position p of this sequence would be rotated at if the module counted every position
    it was given with any cache."""
    stale = {} if torch.equal(counted, torch.arange(len(counted))) else \
        bind([GQA_POSITIONS_COUNTED], state, x, n_heads, n_kv_heads, rope, chunks, counted, select)
    return {**gqa_mistakes(state, x, n_heads, n_kv_heads, rope=rope, chunks=chunks, select=select), **stale}


# Errors of a forward whose keys or values reach the attention with the wrong number of heads, named by the sizes
# they reveal and the check's n_heads, n_kv_heads and d_k (gqa_heads_error).
KV_SPLIT_N_HEADS = recognised(
    "grouped_query_attention", "kv_split_n_heads",
    "your keys or values are split into n_heads heads (split_heads(self.w_k(x), self.n_heads)): w_k and w_v make "
    "n_kv_heads * d_k features, n_kv_heads heads of d_k, so split them with split_heads(..., self.n_kv_heads); "
    "repeat_kv then makes n_heads heads of them")
# A family: n_rep, the copies of each key/value head, another size of the module's than n_heads // n_kv_heads.
GQA_N_REP = recognised(
    "grouped_query_attention", "n_rep",
    "your n_rep is {n_rep}: it is n_heads // n_kv_heads, the number of query heads that share one key/value head, "
    "so that repeat_kv(k, n_rep) makes n_heads heads, one for each query head")
N_REP_SIZES: dict[str, Callable[[int, int], int]] = {"self.n_kv_heads": lambda h, kv: kv, "self.n_heads": lambda h, kv: h}
SPLIT_NOT_DIVISIBLE = re.compile(r"d_model=(\d+) is not divisible by n_heads=(\d+)")  # the split_heads stand-in's words
ROPE_WIDTH = re.compile(r"x has (\d+) features, the tables are for (\d+)")  # the apply_rope stand-in's words


def gqa_heads_error(message: str, n_heads: int, n_kv_heads: int, d_k: int) -> "Known | None":
    """The known mistake that an error of GroupedQueryAttention(n_heads * d_k, n_heads, n_kv_heads)'s
    forward names, where only one mistake explains it: the keys' or values' n_kv_heads * d_k features split into
    n_heads (split_heads refuses, or apply_rope is handed d_k / n_rep features), or, where the attention's
    matmul finds the queries' n_heads heads (tensor a) against another count of key/value heads (tensor b), the
    one mistake that makes that count: the split into n_heads, or repeat_kv applied twice (caching after it,
    say), make n_heads * n_rep; an n_rep of N_REP_SIZES makes n_kv_heads * n_rep; no repeat (or a repeat_kv along
    another dim) leaves n_kv_heads."""
    if n_kv_heads >= n_heads or n_heads % n_kv_heads:
        return None
    n_rep, width = n_heads // n_kv_heads, n_kv_heads * d_k
    found = SPLIT_NOT_DIVISIBLE.search(message)
    if found and (int(found[1]), int(found[2])) == (width, n_heads):
        return KV_SPLIT_N_HEADS
    found = ROPE_WIDTH.search(message)
    if found and width % n_heads == 0 and (int(found[1]), int(found[2])) == (width // n_heads, d_k):
        return KV_SPLIT_N_HEADS
    found = MISMATCHED_SIZES.search(message)
    if not found or int(found[1]) != n_heads or "dimension 1" not in message:
        return None
    # (mistake, the key/value heads it makes); None: a mistake that has no entry here, which blocks the others
    made = [(KV_SPLIT_N_HEADS, n_heads * n_rep), (None, n_heads * n_rep), (None, n_kv_heads),
            *((GQA_N_REP.text(n_rep=name), n_kv_heads * size(n_heads, n_kv_heads)) for name, size in N_REP_SIZES.items())]
    matching = [known for known, count in made if count == int(found[2])]
    return matching[0] if len(matching) == 1 else None


# A family: the copies' new axis at another place before the reshape (at 1 it is repeat_kv_tiled).
REPEAT_KV_AXIS = mistake(
    "grouped_query_attention", "repeat_kv_axis",
    "your repeat_kv puts the n_rep copies on a new axis {axis} (x.unsqueeze({axis}).expand(...)) before the reshape "
    "to (B, Hkv * n_rep, T, Dh): the copies' axis comes right after the heads, x[:, :, None].expand(B, Hkv, n_rep, "
    "T, Dh)", lambda x, n_rep, axis: _expanded(x, n_rep, axis))


def _expanded(x: Tensor, n_rep: int, axis: int) -> Tensor:
    new = x.unsqueeze(axis)
    sizes = list(new.shape)
    sizes[axis] = n_rep
    B, H, T, Dh = x.shape
    return new.expand(*sizes).reshape(B, H * n_rep, T, Dh)


# A family: the copies made along another dim than the heads', in a row (repeat_interleave) or tiled (repeat);
# repeat_interleave along dims 2 and 3 and repeat along dim 1 are named entries.
REPEAT_KV_DIM = mistake(
    "grouped_query_attention", "repeat_kv_dim",
    "your repeat_kv is x.{call}, copies along dim {dim}: the copies go along the heads, dim 1, each key/value head "
    "n_rep times in a row, torch.repeat_interleave(x, n_rep, dim=1)",
    lambda x, n_rep, tiled, dim: x.repeat(*(n_rep if d == dim else 1 for d in range(x.dim()))) if tiled
    else x.repeat_interleave(n_rep, dim=dim))
REPEAT_KV_DIMS = ((False, 0), (True, 0), (True, 2), (True, 3))


def repeat_kv_mistakes(x: Tensor, n_rep: int) -> Mistakes:
    """For repeat_kv(x, n_rep); also the copies' axis anywhere but after the heads (REPEAT_KV_AXIS), and the
    copies along another dim (REPEAT_KV_DIM)."""
    family = {REPEAT_KV_AXIS.text(axis=axis): REPEAT_KV_AXIS.on(x, n_rep, axis) for axis in (0, 3, 4)}
    for tiled, dim in REPEAT_KV_DIMS:
        call = f"repeat({', '.join('n_rep' if d == dim else '1' for d in range(4))})" if tiled else \
            f"repeat_interleave(n_rep, dim={dim})"
        family[REPEAT_KV_DIM.text(call=call, dim=dim)] = REPEAT_KV_DIM.on(x, n_rep, tiled, dim)
    return besides(bind(REPEAT_KV_MISTAKES, x, n_rep), family)


GQA_LAYER_BIAS = mistake("grouped_query_attention", "layer_bias",
                         "your {layers} has a bias although bias=False (nn.Linear's default bias=True): pass "
                         "bias=bias to every nn.Linear", dict())


def gqa_key_mistakes(expected: set[str], bias: bool) -> Mistakes:
    """For the state-dict keys: every layer without its bias, or with one; or (bias=False) some layers with one."""
    named = bind([GQA_NO_BIASES if bias else GQA_BIASES], expected)
    if bias:
        return named
    return besides(named, biased_layer_mistakes(GQA_LAYER_BIAS, expected, ("w_q", "w_k", "w_v", "out_proj")))


def gqa_shape_mistakes(d_model: int, n_heads: int, n_kv_heads: int, key: str) -> Mistakes:
    """For the shape of state_dict()[key] of GroupedQueryAttention(d_model, n_heads, n_kv_heads)."""
    if not key.startswith(("w_k.", "w_v.")):
        return {}
    return bind(KV_LAYER_SHAPE_MISTAKES, d_model, n_kv_heads, key.endswith(".bias"), layer=key.split(".")[0])


def gqa_appended_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int,
                          rope: tuple[Tensor, Tensor] | None, chunks: list[tuple[int, int]], call: int,
                          index: int) -> Mistakes:
    """For the k (index 0) or v (index 1) that cached call number `call` hands to cache.update."""
    batch, _, d_model = x.shape
    start, stop = chunks[call]

    def appended(variant: str) -> Tensor:
        return gqa_calls(state, x, n_heads, n_kv_heads, rope=rope, chunks=chunks, variant=variant)[1][call][index]

    mistakes = {**bind([CACHE_AFTER_REPEAT], batch, n_heads, stop - start, d_model // n_heads),
                **simulated([GQA_MISTAKES_BY_VARIANT["kv_no_transpose"]], appended)}
    if rope is not None and index == 0:  # positions from 0 first: for one new position at 0 it means no rotation
        mistakes.update(simulated([GQA_MISTAKES_BY_VARIANT["rope_from_zero"], CACHED_KEYS_NOT_ROTATED], appended))
    return mistakes


CACHE_TRUTH_VALUE = recognised(
    "grouped_query_attention", "cache_truth_value",
    "your check lets a mask through with an empty cache (it raises once the cache holds a position): `if cache "
    "and ...` asks the cache's truth value, and an empty KVCache has len 0, so it reads as False; test "
    "`cache is not None`")
