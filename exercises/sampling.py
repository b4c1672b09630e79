"""Decoding: temperature, top-k, top-p and generation (component ``sampling``).

A language model gives, at every position, one score (logit) per vocabulary
entry. Decoding turns the scores of the last position into the next token, then
feeds that token back in, one at a time. Three functions live here:

- ``filter_logits``: temperature, then the top-k and top-p (nucleus) filters;
- ``sample_next_token``: greedy for temperature 0, else one draw per row;
- ``generate``: the loop, with the model's KV cache.

``torch.topk``, ``torch.sort``, ``torch.cumsum`` and ``torch.multinomial`` are all
allowed. The checks compare ``filter_logits`` with a brute-force filter, and
judge the draws by their distribution (many draws against the filtered softmax)
and by their determinism, not by equality with ``torch.multinomial``'s.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor


def filter_logits(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> Tensor:
    """``(..., V)`` -> ``(..., V)``: the scaled logits, ``-inf`` where a filter removed a token.

    Temperature: dividing the logits by ``temperature`` before the softmax
    sharpens the distribution when it is below 1 (the likeliest tokens take more
    of the mass; towards 0 it becomes greedy) and flattens it above 1 (more
    surprising tokens). It does not change which token is the most likely.

    Top-k keeps, in every row (the last dimension), the entries at or above the
    row's ``top_k``-th largest value. Ties at that boundary are all kept, so a row
    may keep more than ``top_k`` entries; a ``top_k`` above ``V`` keeps everything.

    Top-p (nucleus) works on the softmax of what top-k left: a token is kept when
    the total probability of the tokens *strictly more probable than it* is below
    ``top_p``. Sorted from most to least probable, that keeps the shortest run
    whose mass reaches ``top_p``, the token that crosses it included, and tokens
    tied with a kept one are kept too. The most probable token has nothing above
    it, so at least one token always stays; ``top_p = 1`` keeps every token.

    ``None`` switches a filter off. Every removed entry becomes ``-inf`` (so that
    its softmax weight is exactly 0); kept entries hold ``logits / temperature``.
    The input is not modified.

    Raises ``ValueError`` (graded) if ``temperature <= 0``, ``top_k < 1`` or
    ``top_p`` is outside ``(0, 1]``.

    TODO (sampling), in words:
      1. Check the three arguments and raise ``ValueError`` as described above.
      2. Divide by the temperature (into a new tensor).
      3. Top-k: find each row's ``top_k``-th largest value (keep the last
         dimension so that it broadcasts) and fill with ``-inf`` every entry
         below it, not those equal to it.
      4. Top-p: take the softmax of the result; for every token, the sum of
         the probabilities that are strictly greater than its own; fill with
         ``-inf`` where that sum is ``top_p`` or more. (Sorting and a cumulative
         sum get there too: mind the token that crosses ``top_p`` and the ties.)
    """
    raise NotImplementedError("sampling: write filter_logits")


def sample_next_token(logits: Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    """``(B, V)`` -> int64 ``(B,)``: one token index per row.

    ``temperature == 0`` means greedy: each row's index of its largest logit, the
    first one where several are equal (what ``argmax`` returns); no filter and no
    randomness are needed. Otherwise: one draw per row from
    ``softmax(filter_logits(logits, ...))``, the probabilities, not the logits.

    Why pass a generator instead of seeding torch? ``torch.manual_seed`` and
    every draw without ``generator=`` use and move the process's *global* random
    state, which everything else (dropout, weight initialisation, the data order)
    shares: sampling would change what the rest of a program does, and could not
    be replayed on its own. All the randomness here comes from ``generator``, so
    two generators in the same state give the same tokens, and the global state
    is left alone (``torch.multinomial``, ``torch.rand`` and friends take
    ``generator=``).

    TODO (sampling), in words:
      1. Temperature 0: return the argmax over the vocabulary (the last
         dimension).
      2. Otherwise filter, take the softmax over the vocabulary, draw one index
         per row with the generator, and return them as a ``(B,)`` tensor.
    """
    raise NotImplementedError("sampling: write sample_next_token")


def generate(model: nn.Module, idx: Tensor, max_new_tokens: int, *, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None,
             generator: torch.Generator | None = None) -> Tensor:
    """``(B, T)`` int64 prompt -> ``(B, T + max_new_tokens)``: the prompt followed by the new tokens.

    ``model`` is a ``TinyLM`` or anything like it: ``model(idx, caches=caches)``
    gives logits ``(B, T, V)``, ``model.new_caches()`` makes one empty KV cache
    per block, and ``model.max_len`` is the most positions it has.

    Why the cache? Without it, every step would run the whole sequence through
    the model again, recomputing keys and values that never change. With it, the
    prompt goes through once (filling the caches), and then each new token
    alone: its position follows the cached ones, and its attention reads the
    cached keys and values. Feeding old tokens again with the cache would put
    them at new positions, a second time. The token chosen last need not be fed
    at all: nothing asks for its logits (and when the output fills
    ``max_len`` there is no position left for it).

    Each token is chosen by ``sample_next_token`` (with the same ``temperature``,
    ``top_k``, ``top_p`` and ``generator``) from the logits of the *last*
    position of the call. The prompt is not modified. Runs without gradients.

    Raises ``ValueError`` (graded) if ``max_new_tokens < 0`` or
    ``T + max_new_tokens > model.max_len``; ``max_new_tokens == 0`` returns the
    prompt.

    TODO (sampling), in words:
      1. Check the lengths and raise ``ValueError`` as described above.
      2. Make fresh caches, once.
      3. Repeat ``max_new_tokens`` times: run the model on what the caches do
         not hold yet (the prompt the first time, then the last token, shape
         ``(B, 1)``), pick the next token from the last position's logits, and
         keep it.
      4. Return the prompt with the new tokens appended (a new tensor).
    """
    raise NotImplementedError("sampling: write generate")
