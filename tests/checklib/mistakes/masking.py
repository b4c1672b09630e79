"""The known mistakes of `masking` (Causal masks): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised
from .general import besides


def _ones(q_len: int, k_len: int) -> Tensor:
    return torch.ones(q_len, k_len, dtype=torch.bool)


CAUSAL_MASK_MISTAKES = (
    mistake("masking", "diagonal_excluded",
            "your mask excludes the diagonal: a query may attend its own position too "
            "(j <= i + (k_len - q_len), not <)", lambda q_len, k_len: _ones(q_len, k_len).tril(diagonal=k_len - q_len - 1)),
    mistake("masking", "offset_ignored",
            "your mask ignores the offset k_len - q_len: the queries are the LAST q_len positions, "
            "so the diagonal moves right by k_len - q_len", lambda q_len, k_len: _ones(q_len, k_len).tril()),
    mistake("masking", "upper_triangle",
            "your mask keeps the upper triangle (triu): True must be on and below the (shifted) diagonal, "
            "so queries never see the future", lambda q_len, k_len: _ones(q_len, k_len).triu(diagonal=k_len - q_len)),
    mistake("masking", "offset_reversed",
            "your mask's diagonal moves the wrong way: with k_len > q_len it moves right by k_len - q_len "
            "(tril(diagonal=k_len - q_len)), not left", lambda q_len, k_len: _ones(q_len, k_len).tril(diagonal=q_len - k_len)),
    mistake("masking", "inverted_causal", "your mask is inverted: True must mark the keys a query MAY attend",
            lambda q_len, k_len: ~_ones(q_len, k_len).tril(diagonal=k_len - q_len)),
    mistake("masking", "transposed", "your mask is transposed: it should be (q_len, k_len), one row per query",
            lambda q_len, k_len: _ones(k_len, q_len).tril(diagonal=q_len - k_len)),
    mistake("masking", "all_true", "your mask is all True, so every query sees the future: keep the lower "
            "triangle, ones.tril(diagonal=k_len - q_len)", lambda q_len, k_len: _ones(q_len, k_len)),
)
MASKED_WHERE_ALLOWED = mistake(
    "masking", "masked_where_allowed",
    "you masked the positions where the mask is True; True means 'may attend', so fill where it is False "
    "(masked_fill(~mask, ...))", lambda scores, full_mask, fill: torch.full_like(scores[full_mask], fill))
MASKED_FILL_MISTAKES = (
    mistake("masking", "filled_with_zero", "you filled the masked scores with 0, and softmax still gives a score of 0 "
            "real weight", lambda masked, scores_there: torch.zeros_like(masked)),
    mistake("masking", "not_applied", "the masked positions still hold their original scores: the mask was not applied",
            lambda masked, scores_there: scores_there),
)
FILL_NOT_LOW_ENOUGH = mistake(
    "masking", "fill_not_low_enough",
    "you filled the masked scores with {fill:g}, which is not low enough: real scores can be as low "
    "as -1e6, so use -inf, torch.finfo(dtype).min or a constant <= -1e9", lambda masked, scores_there: masked)
# A family: an additive mask (BERT's), the scores kept and a constant added where the mask is False.
MASK_ADDED = mistake(
    "masking", "mask_added",
    "you added {fill:.3g} to the masked scores (an additive mask) instead of replacing them, so what is left there "
    "still depends on the score (score {fill:+.3g}): replace them with one very low value, "
    "scores.masked_fill(~mask, float('-inf')), torch.finfo(dtype).min or a constant <= -1e9",
    lambda masked, scores_there, fill: scores_there.double() + fill)
BOOL_MASK_ADDED = mistake(
    "masking", "bool_mask_added",
    "you added the bool mask to the scores (scores + mask counts True as 1 and False as 0): a bool mask says where "
    "to fill, it is not added; fill where it is False, scores.masked_fill(~mask, float('-inf'))",
    lambda scores, full_mask: scores[full_mask] + 1)
MASK_TIMES_INF = mistake(
    "masking", "mask_times_inf",
    "your allowed scores came back NaN: 0 * -inf is NaN, so an additive mask made by multiplying, "
    "(~mask) * float('-inf') (or ~mask * -inf added to mask * scores), poisons every score it should leave alone; "
    "fill instead, scores.masked_fill(~mask, float('-inf'))",
    lambda scores, full_mask: torch.full_like(scores[full_mask], float("nan")))
FILLED_IN_PLACE = mistake("masking", "filled_in_place",
                          "apply_mask filled the caller's scores in place (masked_fill_): use masked_fill or torch.where, "
                          "which return a new tensor", lambda scores, full, fill: scores.masked_fill(~full, fill))


MASK_NONE_FAILS = recognised("masking", "mask_none_fails",
                             "your apply_mask fails when mask is None: mask may be None (nothing to mask), and then "
                             "the scores come back unchanged (if mask is None: return scores)")


# Families: any diagonal of a tril, as a shift of the right one (late or early) or as a fixed one.
# Each value is its own sentence, so a case that rules a value out rules it out for the whole check.
DIAGONAL_LATE = mistake(
    "masking", "diagonal_late",
    "your mask is tril(diagonal=k_len - q_len + {n}): each query also sees the next {n} key(s), from the future; "
    "the causal mask is tril(diagonal=k_len - q_len), j <= i + (k_len - q_len)",
    lambda q_len, k_len, shift: _ones(q_len, k_len).tril(diagonal=k_len - q_len + shift))
DIAGONAL_EARLY = mistake(
    "masking", "diagonal_early",
    "your mask is tril(diagonal=k_len - q_len - {n}): each query misses its own key and the {before} before it; "
    "the causal mask is tril(diagonal=k_len - q_len), j <= i + (k_len - q_len)",
    lambda q_len, k_len, shift: _ones(q_len, k_len).tril(diagonal=k_len - q_len + shift))
DIAGONAL_FIXED = mistake(
    "masking", "diagonal_fixed",
    "your mask is tril(diagonal={diagonal}) whatever the lengths: the diagonal moves with them, "
    "tril(diagonal=k_len - q_len), since the queries are the LAST q_len of the k_len positions",
    lambda q_len, k_len, diagonal: _ones(q_len, k_len).tril(diagonal=diagonal))
SHIFTS = (-4, -3, -2, 1, 2, 3, 4)  # 0 is right; -1 is diagonal_excluded
DIAGONALS = (-4, -3, -2, -1, 1, 2, 3, 4)  # 0 is offset_ignored


def _shifted(q_len: int, k_len: int, shift: int) -> tuple[str, Callable[[], Tensor]]:
    entry = DIAGONAL_LATE if shift > 0 else DIAGONAL_EARLY
    return entry.text(n=abs(shift), before=-shift - 1), entry.on(q_len, k_len, shift)


# A family: the ones built with other sizes than (q_len, k_len), then tril(diagonal=k_len - q_len) as asked.
MASK_SIZES = mistake("masking", "mask_sizes",
                     "your mask is built from torch.ones({sizes}): it is (q_len, k_len), one row per query and one "
                     "column per key, torch.ones(q_len, k_len).tril(diagonal=k_len - q_len)", dict())
MASK_SIZE_CHOICES = ("k_len, q_len", "q_len, q_len", "k_len, k_len")


def _mask_sizes(q_len: int, k_len: int) -> Mistakes:
    """MASK_SIZES, where q_len and k_len differ (else every member is right)."""
    if q_len == k_len:
        return {}
    sizes = {"q_len": q_len, "k_len": k_len}
    return {MASK_SIZES.text(sizes=choice): (lambda rows=sizes[choice.split(", ")[0]], cols=sizes[choice.split(", ")[1]]:
                                            _ones(rows, cols).tril(diagonal=k_len - q_len))
            for choice in MASK_SIZE_CHOICES}


def causal_mask_mistakes(q_len: int, k_len: int, got: Any = None) -> Mistakes:
    """For causal_mask(q_len, k_len) (which gave `got`); also every tril of another diagonal (on a square mask,
    only as a shift: the two read the same there)."""
    family = dict(_shifted(q_len, k_len, s) for s in SHIFTS)
    if q_len != k_len:
        family.update({DIAGONAL_FIXED.text(diagonal=d): DIAGONAL_FIXED.on(q_len, k_len, d) for d in DIAGONALS
                       if d != q_len - k_len})  # offset_reversed
    family.update(_mask_sizes(q_len, k_len))
    return besides(bind(CAUSAL_MASK_MISTAKES, q_len, k_len), family, got)


def masked_value(values: Tensor) -> float | None:
    """The one constant in `values` if they are all the same (the fill value a student used), else None."""
    if values.numel() == 0 or not bool((values == values.flatten()[0]).all()):
        return None
    return values.flatten()[0].item()


def kept_where_allowed_mistakes(out: Tensor, scores: Tensor, full_mask: Tensor) -> Mistakes:
    """For `out[full_mask]` (the allowed positions): what comes back if the mask was used the wrong way round, or
    added to the scores."""
    fill = masked_value(out[full_mask])
    low = fill is not None and (fill <= -1e9 or fill == float("-inf"))
    return {**(bind([MASKED_WHERE_ALLOWED], scores, full_mask, fill) if low else {}),
            **bind([BOOL_MASK_ADDED, MASK_TIMES_INF], scores, full_mask)}


def masked_fill_mistakes(masked: Tensor, scores_there: Tensor) -> Mistakes:
    """For the values at the masked positions: a fill that is not low enough, or no fill at all."""
    fill = masked_value(masked)
    mistakes = bind(MASKED_FILL_MISTAKES, masked, scores_there)
    if fill is not None and fill != 0 and fill > -1e9:
        mistakes.update(bind([FILL_NOT_LOW_ENOUGH], masked, scores_there, fill=fill))
    added = (masked.double() - scores_there.double()).median().item() if masked.numel() else 0.0
    if fill is None and math.isfinite(added) and added < 0:
        added = float(f"{added:.3g}")
        mistakes.update(bind([MASK_ADDED], masked, scores_there, added, fill=added))
    return mistakes


def filled_in_place_mistakes(scores: Tensor, mask: Tensor, after: Tensor) -> Mistakes:
    full = mask.expand(scores.shape)
    fill = masked_value(after[~full])
    return bind([FILLED_IN_PLACE], scores, full, fill) if fill is not None else {}
