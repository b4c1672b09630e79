"""The known mistakes of `kv_cache` (The KV cache): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import re
from typing import Any

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised
from .general import besides, mismatched_sizes
from .head_splitting import heads
from .multi_head_attention import attention, mha
from .pre_ln_block import block
from .qkv_projection import linear


CACHE_UPDATE_MISTAKES = (
    mistake("kv_cache", "cache_forgets",
            "your cache forgets: update returned only the newest keys and values, not everything cached so far",
            lambda chunks: chunks[-1]),
    mistake("kv_cache", "cat_features",
            "your cache concatenates along the last dimension (the head features) instead of the sequence dimension -2",
            lambda chunks: torch.cat(chunks, dim=-1)),
    mistake("kv_cache", "cat_heads",
            "your cache concatenates along dimension 1 (the heads) instead of the sequence dimension -2",
            lambda chunks: torch.cat(chunks, dim=1)),
    mistake("kv_cache", "cat_batch",
            "your cache concatenates along dimension 0 (the batch) instead of the sequence dimension -2",
            lambda chunks: torch.cat(chunks, dim=0)),
    mistake("kv_cache", "new_before_cached",
            "your cache puts the new keys and values before the cached ones: append them, torch.cat([cached, new], "
            "dim=-2), so that position t sits at index t", lambda chunks: torch.cat(chunks[::-1], dim=-2)),
    mistake("kv_cache", "returned_before_update",
            "update returned what was cached before this call, without the new keys and values",
            lambda chunks: torch.cat(chunks[:-1], dim=-2)),
)
CACHE_LEN_MISTAKES = (
    mistake("kv_cache", "len_counts_batch",
            "len() of your cache counts the batch (len of the key tensor is its first dimension), not the positions "
            "(dim -2)", lambda shape, calls, positions: shape[0]),
    mistake("kv_cache", "appended_twice",
            "your forward appends every position twice (cache.update called twice per forward)",
            lambda shape, calls, positions: 2 * positions),
    mistake("kv_cache", "len_counts_calls", "len() of your cache counts update calls, not positions",
            lambda shape, calls, positions: calls),
    mistake("kv_cache", "len_counts_heads", "len() of your cache counts the heads (dimension 1), not the positions "
            "(dim -2)", lambda shape, calls, positions: shape[1]),
    mistake("kv_cache", "len_counts_features",
            "len() of your cache counts the head features (the last dimension), not the positions (dim -2)",
            lambda shape, calls, positions: shape[3]),
)
DECODING_MISTAKES = (
    mistake("kv_cache", "new_positions_only",
            "your cached forward attends only to the new positions, not to the cached ones: let the queries attend "
            "to all the keys and values that cache.update returns (if update itself returns only the new ones, "
            "its own check says so)",
            lambda state, x, start, stop, n_heads, at: mha(
                state, x[:, start:stop], torch.ones(stop - start, stop - start, dtype=torch.bool).tril(),
                n_heads)[0][:, at - start]),
    mistake("kv_cache", "no_causal_mask",
            "your cached forward lets the new positions attend to each other without a causal mask: build it with "
            "causal_mask(q_len, k_len), even when several positions are new or the cache was empty",
            lambda state, x, start, stop, n_heads, at: mha(state, x[:, :stop], None, n_heads)[0][:, at]),
    mistake("kv_cache", "new_keys_first",
            "your cached forward attends to the keys and values in the order new, then cached: the cache must "
            "append, so that key t is position t and causal_mask(q_len, k_len) lines up with the positions",
            lambda state, x, start, stop, n_heads, at: _new_keys_first(state, x, start, stop, n_heads)[:, at - start]),
    mistake("kv_cache", "as_if_no_cache",
            "your cached forward attends only to the new positions, without a mask, as if there were no cache",
            lambda state, x, start, stop, n_heads, at: mha(state, x[:, start:stop], None, n_heads)[0][:, at - start]),
)


def _new_keys_first(state: dict[str, Tensor], x: Tensor, start: int, stop: int, n_heads: int) -> Tensor:
    """MultiHeadAttention over x[:, start:stop] whose keys and values are the new positions' followed by the
    cached ones' (a cache that prepends), with the causal mask by index."""
    order = torch.cat([torch.arange(start, stop), torch.arange(0, start)])
    q = heads(linear(x[:, start:stop], state, "w_q"), n_heads)
    k, v = (heads(linear(x[:, order], state, f"w_{n}"), n_heads) for n in "kv")
    mask = torch.ones(stop - start, stop, dtype=torch.bool).tril(diagonal=start)
    out, _ = attention(q, k, v, mask)
    return linear(out.transpose(1, 2).reshape(x.shape[0], stop - start, x.shape[-1]), state, "out_proj")


def _uncached_blocks(states: list[dict[str, Tensor]], x: Tensor, start: int, stop: int, n_heads: int,
                     at: int) -> Tensor:
    h = x[:, start:stop]
    for state in states:
        h = block(state, h, None, n_heads)
    return h[:, at - start]


BLOCKS_UNCACHED = mistake("kv_cache", "blocks_uncached",
                          "your blocks decode as if there were no cache: each block attends only to the new positions, "
                          "without a mask. A TransformerBlock.forward that does not hand its cache to self.attention "
                          "computes this, and so do an attention that drops what cache.update returns or builds no "
                          "causal mask with a cache, and an update that forgets (the attention's and the cache's own "
                          "checks tell which)",
                          _uncached_blocks)
APPENDED_MISTAKES = (
    mistake("kv_cache", "cached_before_split",
            "your forward stores {name} in the cache before the head split, (B, T, D): split the heads first, "
            "the cache holds (B, H, T, Dh)", lambda own, other, n_heads: own),
    mistake("kv_cache", "keys_values_swapped", "your forward hands cache.update the {other} as {name}",
            lambda own, other, n_heads: heads(other, n_heads)),
)
REPROJECTED = mistake("kv_cache", "reprojected",
                      "your forward re-projects the cached positions with the current weights: a position is projected "
                      "once, when it is new, and its keys and values are then reused from the cache",
                      lambda new_state, x, n_heads, layer: heads(linear(x, new_state, layer), n_heads))


EMPTY_LEN_FAILS = recognised("kv_cache", "empty_len_fails",
                             "len() of a new cache fails: nothing is cached yet (no key tensor), so __len__ must "
                             "return 0 before it reads a tensor's size")
MASK_OVER_NEW_ONLY = recognised("kv_cache", "mask_over_new_only",
                                "your causal mask with a cache is over the new positions only, (T, T): the scores are "
                                "(T, cached + T), so build causal_mask(q_len, k_len) with k_len the length that "
                                "cache.update returns")


def mask_over_new_only(message: str, new: int, total: int) -> bool:
    """Whether an error says that a (new, new) mask met (new, total) scores."""
    return new != total and mismatched_sizes(message) == {new, total}


MASK_SIZES_SWAPPED = recognised("kv_cache", "mask_sizes_swapped",
                                "your cached forward calls causal_mask with its sizes swapped, causal_mask(k_len, "
                                "q_len), so its own check rejects k_len < q_len: the queries come first, "
                                "causal_mask(q.size(-2), k.size(-2)) with k_len the length that cache.update returns")


def cached_mask_error(exc: Any, new: int, total: int) -> Mistake | None:
    """The mistake that an error of a cached forward (of `new` positions, `total` with the cached ones) names:
    a mask over the new positions only, or causal_mask's ValueError on sizes given in the wrong order."""
    if mask_over_new_only(exc.message, new, total):
        return MASK_OVER_NEW_ONLY
    frames = [line for line in exc.where.splitlines() if line.strip()]
    if new < total and "ValueError" in exc.kinds and any(re.search(r"causal_mask\(\s*k\b", f) for f in frames):
        return MASK_SIZES_SWAPPED
    return None


# A family: one of the two cached tensors built from the other's chunks (a copy-paste of the k line for v), in the
# append branch only or in both.
CACHE_CROSSED = mistake("kv_cache", "crossed",
                        "your update appends {wrong} to {own}, {own} = torch.cat([{own}, {wrong}], dim=-2): it "
                        "appends {new}, {own} = torch.cat([{own}, {new}], dim=-2)", dict())
CACHE_CROSSED_FIRST = mistake("kv_cache", "crossed_first",
                              "your update fills {own} with {wrong} from its first call on (self.k, self.v = k, k, "
                              "say): {own} holds {new}, the first call's and those appended after it", dict())


def cache_update_mistakes(chunks: list[Tensor], other: list[Tensor] | None = None, own: str = "") -> Mistakes:
    """For what update returns after appending `chunks` (each (B, H, T, Dh)) one by one; with the other tensor's
    `other` chunks (`own` "k" or "v"), also the other's chunks appended in its place (CACHE_CROSSED)."""
    mistakes = bind(CACHE_UPDATE_MISTAKES, chunks)
    if len(chunks) > 1:
        mistakes[FIRST_CHUNK_TWICE] = lambda: torch.cat([chunks[0], *chunks], dim=-2)
    if other is not None:
        names = dict(own=f"self.{own}", wrong="v" if own == "k" else "k", new=own)
        if len(chunks) > 1:
            mistakes[CACHE_CROSSED.text(**names)] = lambda: torch.cat([chunks[0], *other[1:]], dim=-2)
        mistakes[CACHE_CROSSED_FIRST.text(**names)] = lambda: torch.cat(other, dim=-2)
    return mistakes


# Held-out set 15's update_not_stored: update returns torch.cat([self.k, k]) without assigning it, so the cache
# keeps what its first call stored.
CACHE_NOT_STORED = mistake("kv_cache", "concatenation_not_stored",
                           "your cache keeps only what its first update stored: update returns the concatenation but "
                           "never stores it; assign it first, self.k = torch.cat([self.k, k], dim=-2) (and self.v), "
                           "then return self.k, self.v", lambda first: first)


# update without an `else`: the first call stores k, then appends it again, so the first chunk is cached twice
# and later ones once. After one call it gives what appended_twice gives; the lengths after later calls tell
# them apart (cache_len_sequence_mistakes).
FIRST_CHUNK_TWICE = mistake("kv_cache", "first_chunk_twice",
                            "your update stores the first chunk twice: the first call stores k and v and then "
                            "falls through to the concatenation (an `if` without an `else`), so later chunks are "
                            "appended once but the first is there twice",
                            lambda shape, calls, positions, first: positions + first)


def cache_len_sequence_mistakes(shape: tuple[int, ...], totals: list[int]) -> Mistakes:
    """For the lengths of a cache (keys (B, H, T, Dh)) after each of several forward calls, `totals` the positions
    it should hold after each: every CACHE_LEN_MISTAKES entry and FIRST_CHUNK_TWICE, each as its lengths after
    every call (which tell appended_twice and first_chunk_twice apart)."""
    def lengths(entry: Mistake) -> tuple:
        extra = (totals[0],) if entry is FIRST_CHUNK_TWICE else ()
        return tuple(entry.model(shape, calls, total, *extra) for calls, total in enumerate(totals, 1))

    return {entry: (lambda entry=entry: lengths(entry)) for entry in (*CACHE_LEN_MISTAKES, FIRST_CHUNK_TWICE)}


def cache_len_mistakes(shape: tuple[int, ...], calls: int, positions: int, first: int | None = None) -> Mistakes:
    """For len(cache) with keys of `shape` (B, H, T, Dh) cached after `calls` calls holding `positions` positions,
    `first` of them from the first call."""
    stored_once = bind([CACHE_NOT_STORED], first) if first is not None and calls > 1 else {}
    return {**bind(CACHE_LEN_MISTAKES, shape, calls, positions), **stored_once}


# A family: the cached forward's causal mask with another diagonal than k_len - q_len (the cached positions).
CACHED_MASK_DIAGONAL = mistake(
    "kv_cache", "cached_mask_diagonal",
    "your cached forward's causal mask is tril(diagonal={diagonal}) over the (new, cached + new) scores: with a "
    "cache the queries are the last q_len of k_len positions, so the mask is causal_mask(q_len, k_len), "
    "tril(diagonal=k_len - q_len)",
    lambda state, x, start, stop, n_heads, at, diagonal: mha(
        state, x[:, :stop], _rows_masked(start, stop, diagonal), n_heads)[0][:, at])
CACHED_DIAGONALS = {"0": lambda start: 0, "k_len - q_len + 1": lambda start: start + 1,
                    "k_len - q_len - 1": lambda start: start - 1}


def _rows_masked(start: int, stop: int, diagonal: int) -> Tensor:
    """(stop, stop): causal rows for the cached positions, tril(diagonal) of (new, stop) for the new ones."""
    mask = torch.ones(stop, stop, dtype=torch.bool).tril()
    mask[start:] = torch.ones(stop - start, stop, dtype=torch.bool).tril(diagonal=diagonal)
    return mask


def decoding_mistakes(state: dict[str, Tensor], x: Tensor, start: int, stop: int, n_heads: int,
                      at: int) -> Mistakes:
    """For output position `at` of a cached forward over the chunk x[:, start:stop] after x[:, :start] was cached;
    also the mask's diagonal off (CACHED_DIAGONALS), where something is cached."""
    diagonals = {words: diagonal(start) for words, diagonal in CACHED_DIAGONALS.items()}
    family = {CACHED_MASK_DIAGONAL.text(diagonal=words): CACHED_MASK_DIAGONAL.on(state, x, start, stop, n_heads, at,
                                                                                 diagonal)
              for words, diagonal in diagonals.items()  # with one position cached, k_len - q_len - 1 is 0: neither
              if start > 0 and list(diagonals.values()).count(diagonal) == 1}
    return besides(bind(DECODING_MISTAKES, state, x, start, stop, n_heads, at), family)


FIRST_CACHE_KEPT = mistake(
    "kv_cache", "first_cache_kept",
    "your MultiHeadAttention keeps the first cache it was handed (self.cache) and appends to it on every later call: "
    "a second sequence decoded through the same module with a fresh cache attends to the first sequence's keys "
    "and values too; update the cache passed to each call, and keep none on the module",
    lambda state, x, start, stop, n_heads, at, earlier: mha(
        state, torch.cat([earlier, x[:, :stop]], dim=1),
        torch.ones(earlier.shape[1] + stop, earlier.shape[1] + stop, dtype=torch.bool).tril(),
        n_heads)[0][:, earlier.shape[1] + at])


def decoding_again_mistakes(state: dict[str, Tensor], x: Tensor, start: int, stop: int, n_heads: int, at: int,
                            earlier: Tensor | None) -> Mistakes:
    """As decoding_mistakes, where the same module decoded the sequence `earlier` (B, T0, D) with another cache
    before."""
    stale = {} if earlier is None else bind([FIRST_CACHE_KEPT], state, x, start, stop, n_heads, at, earlier)
    return {**decoding_mistakes(state, x, start, stop, n_heads, at), **stale}


def block_decoding_mistakes(states: list[dict[str, Tensor]], x: Tensor, start: int, stop: int, n_heads: int,
                            at: int) -> Mistakes:
    """For position `at` of two cached blocks over x[:, start:stop]: the blocks did not use their caches."""
    return bind([BLOCKS_UNCACHED], states, x, start, stop, n_heads, at)


# Forward hands the cache its input x, to project the keys and values of every position again on each call.
STORED_INPUT = mistake("kv_cache", "stored_input",
                       "your forward stores its input x in the cache, not the keys and values: the cache holds "
                       "each position's keys and values, (B, H, T, Dh), projected once, when the position is new",
                       lambda x: x)


def appended_mistakes(keys: Tensor, values: Tensor, n_heads: int, name: str, x: Tensor | None = None) -> Mistakes:
    """For what forward hands to cache.update as `name` ('k' or 'v'), given the projected new keys and values
    (and the input `x` that they were projected from)."""
    own, other = (keys, values) if name == "k" else (values, keys)
    stored_input = {} if x is None else bind([STORED_INPUT], x)
    return {**bind(APPENDED_MISTAKES, own, other, n_heads, name=name, other="values" if name == "k" else "keys"),
            **stored_input}


def reprojected_mistakes(new_state: dict[str, Tensor], x: Tensor, n_heads: int, layer: str) -> Mistakes:
    """Keys or values of every position of `x` (the cached ones too) projected with the current weights."""
    return bind([REPROJECTED], new_state, x, n_heads, layer)
