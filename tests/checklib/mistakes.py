"""Mistake models: what a known, common mistake would output on the checks' own inputs.

Each mistake is one entry of the catalogue (`catalogue.py`: an id, the component,
the sentence addressed to the student, the model), declared once here, in its
component's section, and shared by every check that can see it. A model
computes, grader-side and with PyTorch operations only (never from `solutions/`),
the output of the mistake from the same inputs and injected weights a check
already has; a section's simulator (`attention`, `mha`, `block`, ...) computes
many mistakes, each entry one of its switches. The `*_mistakes` bundles bind
entries to a check's inputs: a mapping {sentence: zero-arg callable}, so that
nothing is computed unless the check fails. `compare.assert_close` (and friends)
take such a mapping as `mistakes=` and weigh every mistake against what came back.
Mistakes that a check recognises by itself (from an error that student code
raised) are entries too (`recognised`), named by the check.

Models compute in float64; the comparison uses the check's own tolerance.
"""
from __future__ import annotations

import ast
import functools
import itertools
import math
import re
from typing import Any, Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from .catalogue import GENERAL, Mistake, Mistakes, bind, mistake, recognised, simulated, variants
from .tolerance import Approximate, matches


# torch's words when two tensors' sizes do not broadcast (the mistakes below that students' errors reveal)
MISMATCHED_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def mismatched_sizes(message: str) -> set[int] | None:
    """The two sizes an error says did not broadcast, or None where it says no such thing."""
    sizes = MISMATCHED_SIZES.search(message)
    return None if sizes is None else {int(sizes[1]), int(sizes[2])}


def mapped(mistakes: Mistakes, fn: Callable[[Any], Any]) -> Mistakes:
    """The same mistakes seen through `fn` (e.g. a slice, or a row sum), still lazy."""
    return {sentence: (lambda m=model: fn(m() if callable(m) else m)) for sentence, model in mistakes.items()}


def besides(named: Mistakes, family: Mistakes, got: Any = None, *, prefer_named: bool = True) -> Mistakes:
    """`named` and a fitted `family`. Where a member gives what a named mistake gives, and that is what came
    back (`got`; unknown: assumed), the member says nothing (None): the named sentence is the one that
    teaches there (or, `prefer_named=False`, neither says anything: a diagnosis is never a guess); where it
    is not what came back, both are weighed as usual. Still lazy: the outputs are computed once, when the
    first is weighed."""
    outputs: dict[str, Any] = {}

    def computed(models: Mistakes) -> dict[str, Any]:
        for sentence, model in models.items():
            if sentence not in outputs:
                try:
                    outputs[sentence] = model() if callable(model) else model
                except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
                    outputs[sentence] = None
        return {s: outputs[s] for s in models}

    def shared(mine: Any, others: Mistakes) -> bool:
        """Whether `mine` and another model would both match what came back (as the check weighs them)."""
        if got is None:
            return any(_same(mine, o) for o in computed(others).values())
        return matches(got, mine, None, None) and any(matches(got, o, None, None)
                                                       for o in computed(others).values())

    def member(sentence: str) -> Any:
        mine = computed({sentence: family[sentence]})[sentence]
        return None if shared(mine, named) else mine

    def named_one(sentence: str) -> Any:
        mine = computed({sentence: named[sentence]})[sentence]
        return None if shared(mine, family) else mine

    if prefer_named:
        return {**named, **{s: (lambda s=s: member(s)) for s in family}}
    return {**{s: (lambda s=s: named_one(s)) for s in named}, **{s: (lambda s=s: member(s)) for s in family}}


# --- scaling -----------------------------------------------------------------------------------------

def scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    return q.double() @ k.double().transpose(-2, -1) * scale


SCORES_MISTAKES = (
    mistake("scaling", "no_scale", "your scores equal q·kᵀ without the 1/√d factor (d = q.size(-1))",
            lambda q, k: scores(q, k, 1.0)),
    mistake("scaling", "divided_by_d", "your scores are q·kᵀ divided by d instead of by √d",
            lambda q, k: scores(q, k, 1.0 / q.shape[-1])),
    mistake("scaling", "softmax_applied",
            "your attention_scores applies softmax already: it returns the scaled scores q·kᵀ/√d, and the softmax "
            "comes later, in scaled_dot_product_attention",
            lambda q, k: scores(q, k, q.shape[-1] ** -0.5).softmax(dim=-1)),
    mistake("scaling", "multiplied_by_sqrt_d", "your scores are q·kᵀ multiplied by √d instead of divided by it",
            lambda q, k: scores(q, k, math.sqrt(q.shape[-1]))),
    mistake("scaling", "divided_by_sqrt_queries",
            "your scores are q·kᵀ divided by √Tq, the square root of the number of queries (dim -2), "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(q.shape[-2]))),
    mistake("scaling", "divided_by_sqrt_keys",
            "your scores are q·kᵀ divided by √Tk, the square root of the number of keys, "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(k.shape[-2]))),
    mistake("scaling", "scores_transposed",
            "your scores are k·qᵀ/√d, (..., Tk, Tq), one row per key: they are q·kᵀ/√d, (..., Tq, Tk), one row per "
            "query (q @ k.transpose(-2, -1); an einsum '...qd,...kd->...qk')",
            lambda q, k: scores(k, q, q.shape[-1] ** -0.5)),
    mistake("scaling", "half_power_as_division",
            "your scores are q·kᵀ divided by 2d: Python reads d ** 1 / 2 as (d ** 1) / 2 (** binds tighter than /), "
            "so x / d ** 1 / 2 is x / d / 2: the square root is d ** 0.5 or math.sqrt(d)",
            lambda q, k: scores(q, k, 0.5 / q.shape[-1])),
    mistake("scaling", "half_power_in_parentheses",
            "your scores are q·kᵀ divided by d/2: Python reads (d ** 1 / 2) as (d ** 1) / 2 (** binds tighter "
            "than /): the square root is d ** 0.5 or math.sqrt(d)",
            lambda q, k: scores(q, k, 2.0 / q.shape[-1])),
    mistake("scaling", "divided_by_sqrt_first_dim",
            "your scores are q·kᵀ divided by the square root of q's first dimension (q.size(0), the batch), "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(q.shape[0]))),
)
K_DOT_T = recognised("scaling", "k_dot_t",
                     "your attention_scores uses k.T, which reverses every dimension of a batched k: transpose only "
                     "the last two, k.transpose(-2, -1) (or k.mT)")
FIXED_TRANSPOSE = recognised("scaling", "fixed_transpose",
                             "your attention_scores transposes fixed dimensions of k, such as k.transpose(1, 2), "
                             "which is right for 3-D inputs only: transpose the last two, k.transpose(-2, -1), "
                             "whatever the leading dimensions")


def transpose_mistakes(source: str) -> list[Mistake]:
    """What attention_scores in `source` (the student's attention.py) writes that breaks on other ranks:
    `.T`, or a transpose / swapaxes / permute by fixed, non-negative dimensions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[Mistake] = []
    for node in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "attention_scores"):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr == "T" and K_DOT_T not in found:
                found.append(K_DOT_T)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in ("transpose", "swapaxes", "swapdims", "permute"):
                dims = [a.value for a in sub.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
                if dims and all(d >= 0 for d in dims) and FIXED_TRANSPOSE not in found:
                    found.append(FIXED_TRANSPOSE)
    return found


K_NOT_TRANSPOSED = recognised("scaling", "k_not_transposed",
                              "your scores multiply q by k as it is (q @ k), so d meets Tk: each query is compared "
                              "with each key over d, q @ k.transpose(-2, -1), which gives (..., Tq, Tk)")
UNMULTIPLIABLE = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
BATCH2_SIZES = re.compile(r"dimensions of batch2 tensor to be: \[(\d+), (\d+)\] but got: \[(\d+), (\d+)\]")


def k_not_transposed(message: str, q_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> bool:
    """Whether torch's matmul error says that q (..., Tq, d) met k (..., Tk, d) untransposed: 2-D q and k as
    (Tq x d) and (Tk x d), batched ones as a batch2 of (B, Tk) where (B, d) was expected."""
    if len(q_shape) < 2 or len(q_shape) != len(k_shape):
        return False
    (tq, d), tk, batch = q_shape[-2:], k_shape[-2], math.prod(q_shape[:-2])
    pair = UNMULTIPLIABLE.search(message)
    if pair is not None:
        return len(q_shape) == 2 and tuple(map(int, pair.groups())) == (tq, d, tk, d)
    sizes = BATCH2_SIZES.search(message)
    return sizes is not None and tuple(map(int, sizes.groups())) == (batch, d, batch, tk)


Q_SCALED_IN_PLACE = mistake("scaling", "q_scaled_in_place",
                            "attention_scores divided the caller's q by √d in place (q /= ...): "
                            "compute a new tensor instead", lambda q: q.double() / math.sqrt(q.shape[-1]))


OTHER_SCALE = mistake("scaling", "other_scale",
                      "your scores are q·kᵀ times a constant, but not 1/√d: the scale is 1/math.sqrt(d) with d = "
                      "q.size(-1), the feature size (the values above show the ratio)",
                      lambda q, k, factor: scores(q, k, factor))


# A family: the scores divided by another power of d (0, 1 and -0.5 are entries of their own).
POWER_OF_D = mistake("scaling", "power_of_d",
                     "your scores are q·kᵀ / d**{power}: the scale is 1/√d, q·kᵀ / d**0.5 with d = q.size(-1)",
                     lambda q, k, power: scores(q, k, q.shape[-1] ** -power))
POWERS = (2, 1.5, 0.25, 0.75, -1)


# A family: the scale read from a leading dimension by a fixed index (size(1) is the heads of (B, H, T, d));
# dim 0 (divided_by_sqrt_first_dim) and the positions' dims are entries of their own.
SQRT_OF_LEADING_DIM = mistake("scaling", "sqrt_of_leading_dim",
                              "your scores are q·kᵀ divided by √q.size({dim}), a leading dimension of q "
                              "(the heads of (B, H, T, d)), instead of √d, the feature size: q.size(-1)",
                              lambda q, k, dim: scores(q, k, q.shape[dim] ** -0.5))


def _leading_dims(q: Tensor) -> list[int]:
    """q's dims between the first and the positions whose size tells them from d, Tq and 1."""
    return [dim for dim in range(1, q.dim() - 2) if q.shape[dim] not in (1, q.shape[-1], q.shape[-2])]


def scores_mistakes(q: Tensor, k: Tensor, got: Any = None) -> Mistakes:
    """For attention_scores(q, k); also another power of d (POWERS), a leading dim's size, and given what came
    back, a scale no entry names, fitted to it."""
    family = {POWER_OF_D.text(power=f"{power:g}"): POWER_OF_D.on(q, k, power) for power in POWERS}
    leading = {SQRT_OF_LEADING_DIM.text(dim=dim): SQRT_OF_LEADING_DIM.on(q, k, dim)
               for dim in _leading_dims(q)}
    return {**bind(SCORES_MISTAKES, q, k), **family, **leading, **_other_scale(q, k, got)}


def _other_scale(q: Tensor, k: Tensor, got: Any) -> Mistakes:
    """q·kᵀ times the one factor that `got` is of it, where no named mistake's factor is that one (computed
    only when the check fails, as every model is)."""
    return {OTHER_SCALE.sentence: lambda: _fitted_scale(q, k, got)}


def _fitted_scale(q: Tensor, k: Tensor, got: Any) -> Tensor | None:
    raw = scores(q, k, 1.0)
    if not isinstance(got, Tensor) or got.shape != raw.shape or not bool(torch.isfinite(got).all()):
        return None
    norm = float((raw * raw).sum())
    if norm == 0:
        return None
    factor = float((got.double() * raw).sum()) / norm
    d, known = q.shape[-1], [1.0, q.shape[-1] ** -0.5]
    known += [1.0 / d, math.sqrt(d), q.shape[-2] ** -0.5, k.shape[-2] ** -0.5, q.shape[0] ** -0.5, 0.5 / d, 2.0 / d]
    known += [d ** -power for power in POWERS] + [q.shape[dim] ** -0.5 for dim in _leading_dims(q)]
    if factor == 0 or any(math.isclose(factor, f, rel_tol=1e-3) for f in known):
        return None
    return OTHER_SCALE.model(q, k, factor)


def q_scaled_in_place_mistakes(q: Tensor) -> Mistakes:
    return bind([Q_SCALED_IN_PLACE], q)


# --- masking -----------------------------------------------------------------------------------------

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


def _masked_value(values: Tensor) -> float | None:
    """The one constant in `values` if they are all the same (the fill value a student used), else None."""
    if values.numel() == 0 or not bool((values == values.flatten()[0]).all()):
        return None
    return values.flatten()[0].item()


def kept_where_allowed_mistakes(out: Tensor, scores: Tensor, full_mask: Tensor) -> Mistakes:
    """For `out[full_mask]` (the allowed positions): what comes back if the mask was used the wrong way round, or
    added to the scores."""
    fill = _masked_value(out[full_mask])
    low = fill is not None and (fill <= -1e9 or fill == float("-inf"))
    return {**(bind([MASKED_WHERE_ALLOWED], scores, full_mask, fill) if low else {}),
            **bind([BOOL_MASK_ADDED, MASK_TIMES_INF], scores, full_mask)}


def masked_fill_mistakes(masked: Tensor, scores_there: Tensor) -> Mistakes:
    """For the values at the masked positions: a fill that is not low enough, or no fill at all."""
    fill = _masked_value(masked)
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
    fill = _masked_value(after[~full])
    return bind([FILLED_IN_PLACE], scores, full, fill) if fill is not None else {}


# --- head_splitting ----------------------------------------------------------------------------------

SPLIT_MISTAKES = (
    mistake("head_splitting", "heads_folded_into_batch",
            "your split_heads folds the heads into the batch, (B * H, T, Dh): the contract keeps them apart, "
            "(B, H, T, Dh), and merge_heads takes that four-dimensional layout back",
            lambda x, n_heads: x.reshape(x.shape[0], x.shape[1], n_heads, x.shape[2] // n_heads).transpose(1, 2)
            .reshape(x.shape[0] * n_heads, x.shape[1], x.shape[2] // n_heads)),
    mistake("head_splitting", "split_by_view",
            "you viewed (B, T, D) directly as (B, H, T, Dh) with reshape/view: first view it as (B, T, H, Dh), "
            "then swap T and H with transpose(1, 2)",
            lambda x, n_heads: x.reshape(x.shape[0], n_heads, x.shape[1], x.shape[2] // n_heads)),
    mistake("head_splitting", "interleaved_heads",
            "your heads are interleaved: head h got every H-th feature instead of the contiguous slice "
            "h*Dh .. (h+1)*Dh - 1 (view D as (H, Dh), not (Dh, H))",
            lambda x, n_heads: x.reshape(x.shape[0], x.shape[1], x.shape[2] // n_heads, n_heads).permute(0, 3, 1, 2)),
    mistake("head_splitting", "head_count_as_width",
            "you made n_heads the width of a head instead of the number of heads: D // n_heads heads of n_heads "
            "features each (rearrange(..., d=n_heads) where h=n_heads is meant)",
            lambda x, n_heads: x.reshape(x.shape[0], x.shape[1], x.shape[2] // n_heads, n_heads).transpose(1, 2)),
    mistake("head_splitting", "split_not_transposed",
            "you split D into (H, Dh) but did not swap T and H: the result must be (B, H, T, Dh)",
            lambda x, n_heads: x.reshape(x.shape[0], x.shape[1], n_heads, x.shape[2] // n_heads)),
)
MERGE_MISTAKES = (
    mistake("head_splitting", "merged_by_view",
            "you reshaped (B, H, T, Dh) straight to (B, T, D) without first swapping H and T back (transpose(1, 2))",
            lambda heads: heads.reshape(heads.shape[0], heads.shape[2], heads.shape[1] * heads.shape[3])),
    mistake("head_splitting", "merged_feature_by_feature",
            "you joined the heads feature by feature ((Dh, H) order) instead of head after head ((H, Dh) order)",
            lambda heads: heads.permute(0, 2, 3, 1).reshape(heads.shape[0], heads.shape[2],
                                                            heads.shape[1] * heads.shape[3])),
    mistake("head_splitting", "merge_not_joined", "you swapped H and T back but did not join H and Dh into D",
            lambda heads: heads.transpose(1, 2)),
    mistake("head_splitting", "merge_along_time",
            "your merge_heads joins the heads along the positions, (B, H * T, Dh) (torch.cat(heads, dim=1)): join "
            "them along the features, head after head, (B, T, H * Dh)",
            lambda heads: torch.cat(heads.unbind(1), dim=1)),
    mistake("head_splitting", "merge_reduces_heads",
            "your merge_heads gives (B, T, Dh), one head's width: it reduces the heads away (a sum, a mean, one "
            "head) where it joins them side by side along the features, (B, T, H * Dh)",
            lambda heads: torch.Size((heads.shape[0], heads.shape[2], heads.shape[3]))),
)


RESIZED_INPUT = mistake("head_splitting", "resized_input",
                        "split_heads changed the caller's x in place: x is now (B, T, H, Dh) (resize_, or an "
                        "assignment to x.data): return a new view or reshape of x and leave x as it was",
                        lambda x, n_heads: x.reshape(*x.shape[:-1], n_heads, x.size(-1) // n_heads))


# Families: any view of D's sizes followed by any permutation (split), any permutation before the join (merge).
SPLIT_LAYOUT = mistake(
    "head_splitting", "split_layout",
    "your split_heads gives x.reshape(B, {view}).permute(0, {order}), a (B, {result}) layout: the split is "
    "x.view(B, T, H, Dh).transpose(1, 2), (B, H, T, Dh), head h holding the features h*Dh .. (h+1)*Dh - 1",
    lambda x, n_heads, view, order: _split_as(x, n_heads, view, order))
MERGE_LAYOUT = mistake(
    "head_splitting", "merge_layout",
    "your merge_heads gives heads.permute(0, {order}).reshape(B, T, D): it reshapes a (B, {layout}) layout, and "
    "merge_heads undoes split_heads, heads.transpose(1, 2).reshape(B, T, H * Dh)",
    lambda heads, order: heads.permute(0, *order).reshape(heads.shape[0], heads.shape[2],
                                                         heads.shape[1] * heads.shape[3]))
SPLIT_NAMED = {("T", "H", "Dh"): {(2, 1, 3), (1, 2, 3)}, ("H", "T", "Dh"): {(1, 2, 3)},  # right, or an entry
               ("T", "Dh", "H"): {(3, 1, 2), (2, 1, 3)}}
MERGE_NAMED = {(2, 1, 3), (1, 2, 3), (2, 3, 1)}
AXES = ("H", "T", "Dh")  # of (B, H, T, Dh), after the batch


def _split_as(x: Tensor, n_heads: int, view: tuple[str, ...], order: tuple[int, ...]) -> Tensor:
    sizes = dict(T=x.shape[1], H=n_heads, Dh=x.shape[2] // n_heads)
    return x.reshape(x.shape[0], *(sizes[name] for name in view)).permute(0, *order)


def _identifiable(*sizes: int) -> bool:
    """Whether every layout of axes of these sizes differs from every other (no size 1, no two the same)."""
    return min(sizes) > 1 and len(set(sizes)) == len(sizes)


def _split_family(x: Tensor, n_heads: int) -> Mistakes:
    if x.dim() != 3 or not _identifiable(x.shape[1], n_heads, x.shape[2] // n_heads):
        return {}
    return {text: SPLIT_LAYOUT.on(x, n_heads, view, order) for text, view, order in _split_texts()}


@functools.cache
def _split_texts() -> tuple[tuple[str, tuple[str, ...], tuple[int, ...]], ...]:
    return tuple((SPLIT_LAYOUT.text(view=", ".join(view), order=", ".join(map(str, order)),
                                    result=", ".join(view[i - 1] for i in order)), view, order)
                 for view in itertools.permutations(("T", "H", "Dh")) for order in itertools.permutations((1, 2, 3))
                 if order not in SPLIT_NAMED.get(view, ()))


def split_mistakes(x: Tensor, n_heads: int, got: Any = None) -> Mistakes:
    """For split_heads(x, n_heads) (which gave `got`); also every other view of (T, H, Dh) and permutation of it."""
    return besides(bind(SPLIT_MISTAKES, x, n_heads), _split_family(x, n_heads), got)


def split_in_place_mistakes(x: Tensor, n_heads: int) -> Mistakes:
    """For x after split_heads(x, n_heads): x itself reshaped into heads."""
    return bind([RESIZED_INPUT], x, n_heads)


def merge_mistakes(heads: Tensor, got: Any = None) -> Mistakes:
    """For merge_heads(heads) (which gave `got`); also every other permutation of (H, T, Dh) before the join."""
    family = {MERGE_LAYOUT.text(order=", ".join(map(str, order)), layout=", ".join(AXES[i - 1] for i in order)):
              MERGE_LAYOUT.on(heads, order)
              for order in itertools.permutations((1, 2, 3)) if order not in MERGE_NAMED
              and heads.dim() == 4 and _identifiable(*heads.shape[1:])}
    return besides(bind(MERGE_MISTAKES, heads), family, got)


# --- qkv_projection ----------------------------------------------------------------------------------

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
        same = [name for name, want in expected.items() if _same(out, want)]
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
    return {BIAS_DEFAULT_FALSE.sentence: without_bias}


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


# --- multi_head_attention ----------------------------------------------------------------------------

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
        found[MHA_SCALED_TWICE.sentence] = lambda: mha(state, x, mask, n_heads, divisor=float(d_head))[part]
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


# --- sinusoidal_encoding -----------------------------------------------------------------------------

def table(max_len: int, d_model: int, *, base: float = 10000.0, exponent: str = "2i", first: int = 0,
          even=torch.sin, odd=torch.cos, angle: str = "p*w", denominator: int = 0, numerator: int = 0,
          layout: str = "interleaved", rounded: bool = False) -> Tensor | Approximate:
    """(max_len, d_model) in float64, with one mistake switched on (the exponent is (2i + numerator) /
    (d_model + denominator); `layout` "halves": the even columns' values first, then the odd ones'). `rounded`:
    known only to float32's rounding of each angle (frequencies above 1 make angles far beyond the position)."""
    pairs = torch.arange(0, d_model, 2, dtype=torch.float64)
    if exponent == "i":
        pairs = pairs / 2
    position = torch.arange(first, first + max_len, dtype=torch.float64).unsqueeze(1)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    error = torch.zeros(max_len, d_model, dtype=torch.float64)
    for parity, fn in ((0, even), (1, odd)):
        exps = pairs + (parity if exponent == "column" else 0) + numerator
        w = torch.pow(base, -exps / (d_model + denominator))
        a = {"p*w": position * w, "p+w": position + w, "w": w.expand(max_len, -1)}[angle]
        pe[:, parity::2] = fn(a)
        error[:, parity::2] = 4 * torch.finfo(torch.float32).eps * a.abs()
    if layout == "halves":
        pe, error = (torch.cat([t[:, 0::2], t[:, 1::2]], dim=-1) for t in (pe, error))
    return Approximate(pe, error) if rounded else pe


TABLE_MISTAKES = (
    mistake("sinusoidal_encoding", "sin_cos_swapped",
            "your even columns hold cosines: they hold the sines (are sin and cos swapped?)", dict(even=torch.cos)),
    mistake("sinusoidal_encoding", "odd_sines",
            "your odd columns hold sines: they hold the cosines of the same angles as the sines before them",
            dict(odd=torch.sin)),
    mistake("sinusoidal_encoding", "exponent_i",
            "your exponent uses the pair index i instead of 2i: the frequencies are 10000^(-2i/d_model)",
            dict(exponent="i")),
    mistake("sinusoidal_encoding", "exponent_column",
            "your exponent uses the column index, so a cosine gets a different frequency from the sine before it: "
            "both columns 2i and 2i+1 use 10000^(-2i/d_model)", dict(exponent="column")),
    mistake("sinusoidal_encoding", "base_1000", "your wavelengths use the base 1000 instead of 10000", dict(base=1000.0)),
    mistake("sinusoidal_encoding", "exponent_over_d_minus_1",
            "your exponent divides by d_model - 1: the frequencies are 10000^(-2i/d_model)", dict(denominator=-1)),
    mistake("sinusoidal_encoding", "positive_exponent",
            "your frequencies grow with the pair index, 10000^(+2i/d_model) (the minus sign of the exponent is "
            "missing): they shrink, 10000^(-2i/d_model), the wavelengths growing from 2π to 10000·2π",
            dict(base=1e-4, rounded=True)),
    mistake("sinusoidal_encoding", "positions_from_1", "your positions start at 1 instead of 0", dict(first=1)),
    mistake("sinusoidal_encoding", "angle_sum", "your angle is position + frequency instead of position × frequency",
            dict(angle="p+w")),
    mistake("sinusoidal_encoding", "angle_without_position",
            "your angle leaves the position out, so every row is the same: the angle is position × frequency",
            dict(angle="w")),
    mistake("sinusoidal_encoding", "exp_without_log",
            "your frequencies are exp(-10000·2i/d_model), all 0 but the first: exp needs the log of the base, "
            "exp(-2i·math.log(10000)/d_model) = 10000^(-2i/d_model)", dict(base=math.inf)),
    mistake("sinusoidal_encoding", "sin_cos_halves",
            "your table puts the sines in the first half of the columns and the cosines in the second "
            "(torch.cat([sin, cos], dim=-1)): they are interleaved, the sine of pair i in column 2i (pe[:, 0::2]) "
            "and its cosine in column 2i+1 (pe[:, 1::2])", dict(layout="halves")),
    mistake("sinusoidal_encoding", "cos_sin_halves",
            "your table puts the cosines in the first half of the columns and the sines in the second "
            "(torch.cat([cos, sin], dim=-1)): they are interleaved, the sine of pair i in column 2i (pe[:, 0::2]) "
            "and its cosine in column 2i+1 (pe[:, 1::2])", dict(layout="halves", even=torch.cos, odd=torch.sin)),
)
TABLE_SHAPE_MISTAKES = (
    mistake("sinusoidal_encoding", "batch_dimension",
            "your table has a leading batch dimension, (1, max_len, d_model): return the (max_len, d_model) table",
            lambda max_len, d_model: torch.Size((1, max_len, d_model))),
    mistake("sinusoidal_encoding", "table_transposed",
            "your table is transposed, (d_model, max_len): one row per position",
            lambda max_len, d_model: torch.Size((d_model, max_len))),
)


OTHER_BASE = mistake("sinusoidal_encoding", "other_base",
                     "your wavelengths use the base {base:.3g} instead of 10000",
                     lambda max_len, d_model, base: table(max_len, d_model, base=base))
# A base of 10000 ** k is the exponent k times too large (the values cannot tell which was written; this is
# the mistake people make: an arange(0, d, 2) that already gives 2i, multiplied by 2 again).
EXPONENT_TIMES = mistake("sinusoidal_encoding", "exponent_times",
                         "your exponent is {k:g} times too large, 10000^(-{k:g}·2i/d_model) (as if the base were "
                         "{base:.3g}): it is 2i/d_model, with i counting the pairs (arange(0, d_model, 2) already "
                         "gives 2i)", lambda max_len, d_model, base: table(max_len, d_model, base=base))
EXPONENT_FACTORS = (2.0, 3.0, 4.0, 0.5)
# Every frequency 1 (a base of 1): what an exponent of integers floor-divided gives, 2i // d_model = 0.
EXPONENT_FLOORED = mistake("sinusoidal_encoding", "exponent_floored",
                           "your frequencies are all 1, every pair turning by 1 radian a position: the exponent "
                           "2i / d_model came out 0, as the integer division arange(0, d_model, 2) // d_model "
                           "gives; divide as floats, torch.arange(0, d_model, 2) / d_model",
                           lambda max_len, d_model: table(max_len, d_model, base=1.0))


TABLE_EXPONENT = mistake(
    "sinusoidal_encoding", "exponent_offsets",
    "your frequencies are 10000**(-{numerator} / {denominator}): they are 10000**(-2i / d_model), i counting "
    "the pairs from 0, so columns 0 and 1 turn by 1 radian a position", dict())


def table_mistakes(max_len: int, d_model: int, got: Any = None) -> Mistakes:
    """For the (max_len, d_model) table; given what came back, also a base no entry names, fitted to it, and
    the exponent off by EXPONENT_OFFSETS (exponent_over_d_minus_1 is (0, -1))."""
    family = {text: (lambda k=k: table(max_len, d_model, numerator=k[0], denominator=k[1]))
              for text, k in _exponent_texts(TABLE_EXPONENT, "d_model", (0, -1)).items()}
    return {**simulated(TABLE_MISTAKES, lambda **switches: table(max_len, d_model, **switches)),
            **_other_base(max_len, d_model, got), **family}


def _other_base(max_len: int, d_model: int, got: Any) -> Mistakes:
    """The table with the base that `got`'s pair 1 frequency implies (PE[1, 2] = sin(base ** (-2 / d)))."""
    if not isinstance(got, Tensor) or tuple(got.shape) != (max_len, d_model) or max_len < 2 or d_model < 4:
        return {}
    value = float(got[1, 2])
    if not 0 < value < math.sin(1.0):  # a base above 1 turns pair 1 by less than a radian a position
        return {}
    base = math.asin(value) ** (-d_model / 2)
    # another denominator d_model + k is the base 10000 ** (d_model / (d_model + k)), whose value depends on
    # d_model: the entry that names the denominator is the one that holds for every case
    denominators = [10000.0 ** (d_model / (d_model + k)) for k in {b for _, b in EXPONENT_OFFSETS} if d_model + k > 0]
    if not math.isfinite(base) or any(math.isclose(base, b, rel_tol=1e-2) for b in (10000.0, 1000.0, *denominators)):
        return {}
    if math.isclose(base, 1.0, rel_tol=1e-2):
        return bind([EXPONENT_FLOORED], max_len, d_model)
    k = next((k for k in EXPONENT_FACTORS if math.isclose(base, 10000.0 ** k, rel_tol=1e-2)), None)
    if k is not None:
        return bind([EXPONENT_TIMES], max_len, d_model, 10000.0 ** k, k=k, base=10000.0 ** k)
    return bind([OTHER_BASE], max_len, d_model, base, base=base)


TABLE_CACHED_BY_MAX_LEN = mistake(
    "sinusoidal_encoding", "table_cached_by_max_len",
    "your function keeps the table of an earlier call with the same max_len and returns it for another d_model (a "
    "cache whose key leaves out d_model): build the table of each call's own max_len and d_model",
    lambda max_len, earlier: table(max_len, earlier))


def table_again_mistakes(max_len: int, d_model: int, earlier: int, got: Any = None, *, shape: bool = False
                         ) -> Mistakes:
    """For the (max_len, d_model) table asked after one of the same max_len and d_model `earlier` (its shape's
    mistakes where `shape`, else its values')."""
    stale = {} if earlier == d_model else bind([TABLE_CACHED_BY_MAX_LEN], max_len, earlier)
    return {**(table_shape_mistakes(max_len, d_model) if shape else table_mistakes(max_len, d_model, got)), **stale}


def table_shape_mistakes(max_len: int, d_model: int) -> Mistakes:
    return bind(TABLE_SHAPE_MISTAKES, max_len, d_model)


# --- pre_ln_block ------------------------------------------------------------------------------------

def block(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, *, variant: str = "") -> Tensor:
    """The contract's Pre-LN TransformerBlock in eval mode, float64, with the mistake `variant` switched on."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()
    d_model = x.shape[-1]

    def norm(name, h):
        eps = 1e-6 if variant in (f"{name}_eps_1e-6", "norms_eps_1e-6") else 1e-5
        if variant == "shared_norm1":
            name = "norm1"
        elif variant == "shared_norm2":
            name = "norm2"
        return F.layer_norm(h, (d_model,), s[f"{name}.weight"], s[f"{name}.bias"], eps=eps)

    def attend(h):
        m = mask
        if variant == "ignores_mask":
            m = None
        elif variant == "always_causal" and m is None:
            m = torch.ones(h.shape[1], h.shape[1], dtype=torch.bool).tril()
        return mha(s, h, m, n_heads, prefix="attention.")[0]

    def ff(h):
        hidden = linear(h, s, "ff.0")
        hidden = ACTIVATIONS.get(variant.removeprefix("act_"), F.relu)(hidden) if variant != "gelu" else F.gelu(hidden)
        return linear(hidden, s, "ff.2")

    if variant == "post_ln":
        x = norm("norm1", x + attend(x))
        return norm("norm2", x + ff(x))
    if variant == "residual_from_normed":
        x = norm("norm1", x)
        x = x + attend(x)
        x = norm("norm2", x)
        return x + ff(x)
    if variant in ("attention_output_normed", "ff_output_normed"):  # the norm moved after its sublayer
        x = x + (norm("norm1", attend(x)) if variant == "attention_output_normed" else attend(norm("norm1", x)))
        return x + (norm("norm2", ff(x)) if variant == "ff_output_normed" else ff(norm("norm2", x)))
    h = attend(norm("norm1", x))
    x = h if variant == "no_attention_residual" else x + h
    h = ff(norm("norm1" if variant == "norm1_for_ff" else "norm2", x))
    return h if variant == "no_ff_residual" else x + h


BLOCK_MISTAKES = variants("pre_ln_block", (
    ("your block is Post-LN (it normalises after each residual addition, as the original Transformer did); "
     "this block is Pre-LN: x + attention(norm1(x)), then x + ff(norm2(x))", "post_ln"),
    ("your block has no residual connection around the attention: x = x + dropout(attention(norm1(x), ...))",
     "no_attention_residual"),
    ("your block has no residual connection around the feed-forward: x = x + dropout(ff(norm2(x)))", "no_ff_residual"),
    ("your feed-forward input is normalised with norm1 instead of norm2", "norm1_for_ff"),
    ("your block uses one LayerNorm for both branches (the weights of norm1 in both places)", "shared_norm1"),
    ("your block uses one LayerNorm for both branches (the weights of norm2 in both places)", "shared_norm2"),
    ("your residuals add to the normalised x instead of x itself: keep x, and give norm1(x) only to the attention",
     "residual_from_normed"),
    ("your feed-forward uses GELU; the contract's is ReLU", "gelu"),
    ("your block normalises the attention's output, x + norm1(attention(x)): Pre-LN normalises the sublayer's "
     "input, x + attention(norm1(x))", "attention_output_normed"),
    ("your block normalises the feed-forward's output, x + norm2(ff(x)): Pre-LN normalises the sublayer's input, "
     "x + ff(norm2(x))", "ff_output_normed"),
    ("your block does not pass the mask on to its attention", "ignores_mask"),
    ("your block applies a causal mask when none is given; without a mask every token attends to every other",
     "always_causal"),
    ("your norm1 has eps=1e-6 (timm's and BERT's habit): the contract's is nn.LayerNorm(d_model), eps 1e-5",
     "norm1_eps_1e-6"),
    ("your norm2 has eps=1e-6 (timm's and BERT's habit): the contract's is nn.LayerNorm(d_model), eps 1e-5",
     "norm2_eps_1e-6"),
    ("your norms have eps=1e-6 (timm's and BERT's habit): the contract's are nn.LayerNorm(d_model), eps 1e-5",
     "norms_eps_1e-6"),
))
# A family: the feed-forward's activation another function than the contract's ReLU (GELU is an entry above).
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "identity": lambda t: t}
OTHER_ACTIVATION = mistake(
    "pre_ln_block", "other_activation",
    "your feed-forward's activation is {name}: the contract's is ReLU, nn.Sequential(nn.Linear(d_model, d_ff), "
    "nn.ReLU(), nn.Linear(d_ff, d_model))", dict())
ACTIVATION_WORDS = {"sigmoid": "torch.sigmoid", "tanh": "torch.tanh", "silu": "F.silu", "leaky_relu": "F.leaky_relu",
                    "elu": "F.elu", "identity": "nn.Identity()"}  # code, not prose: the sentence's field


def _activation_family(simulate: Callable[..., Any]) -> Mistakes:
    return {OTHER_ACTIVATION.text(name=words): (lambda v=f"act_{name}": simulate(variant=v))
            for name, words in ACTIVATION_WORDS.items()}


SQUEEZED_BATCH = mistake("pre_ln_block", "squeezed_batch",
                         "your block squeezes a dimension of size 1 away (squeeze(0), or squeeze()): a batch of one "
                         "sequence comes back (B, T, D) too", lambda x: torch.Size(x.shape[1:]))
RESIDUAL_DROPPED = mistake("pre_ln_block", "residual_dropped",
                           "your block drops out the residual stream too (dropout(x + branch)): dropout applies to "
                           "each branch before it is added, x = x + dropout(branch), so that with dropout=1.0 the "
                           "block passes x through unchanged", lambda x: torch.zeros_like(x))
NO_DROPOUT = recognised("pre_ln_block", "no_dropout",
                        "your block never applies dropout: in train mode with dropout=0.5 it gives what eval mode "
                        "gives; drop out each branch with self.dropout before adding it to x")
DROPOUT_IN_EVAL = recognised("pre_ln_block", "dropout_in_eval",
                             "your dropout is still on in eval mode: two calls in eval mode gave different results "
                             "(F.dropout(x, p) drops whatever the mode unless given training=self.training; the "
                             "nn.Dropout submodule follows train() and eval())")
DROPOUT_RATE_IGNORED = mistake(
    "pre_ln_block", "dropout_rate_ignored",
    "your block's dropout does not take the rate it is given: TransformerBlock(..., dropout=1.0) made "
    "nn.Dropout(p={p:g}); pass the argument on, self.dropout = nn.Dropout(dropout)", lambda p: p)


BLOCK_DROPOUT_DEFAULT = recognised("pre_ln_block", "dropout_default",
                                   "your TransformerBlock's dropout defaults to {rate}: the contract's default is "
                                   "dropout=0.1, so a block built without it drops a tenth of each branch in train mode")


def dropout_rate_mistakes(p: Any, asked: float) -> Mistakes:
    """For the rate `p` of the block's `dropout` submodule, built with dropout=`asked`: a number other than it."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isclose(p, asked):
        return {}
    return bind([DROPOUT_RATE_IGNORED], p, p=p)


ONE_NORM_OBJECT = mistake("pre_ln_block", "one_norm_object",
                          "norm1 and norm2 are the same LayerNorm object: loading norm2's weights overwrote norm1's "
                          "(or the other way round); create two separate nn.LayerNorm(d_model)",
                          lambda state, key: state[key.replace("norm1", "@").replace("norm2", "norm1")
                                                   .replace("@", "norm2")])


# A family: the block's dataflow wired another way, each sublayer reading another tensor in scope (x, norm1(x),
# h = the first residual's sum, the attention's output a): (attention input, first residual, ff input, second
# residual), as written in the sentence. The right wiring is ("norm1(x)", "x + ", "norm2(h)", "h + ").
WIRING = mistake(
    "pre_ln_block", "wiring",
    "your block computes h = {first}attention({attn_in}), then returns {second}ff({ff_in}): the Pre-LN block's "
    "residuals are h = x + attention(norm1(x)), then h + ff(norm2(h)), each sublayer reading the stream it adds to",
    dict())
WIRING_CHOICES = (("norm1(x)", "x", "norm2(x)"), ("x + ", "norm1(x) + ", ""), ("norm2(h)", "norm2(x)", "h", "x", "norm1(h)"),
                  ("h + ", "x + ", "norm2(h) + ", ""))
RIGHT_WIRING = ("norm1(x)", "x + ", "norm2(h)", "h + ")


def wired_block(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                wiring: tuple[str, str, str, str], attended: dict[str, Tensor] | None = None) -> Tensor:
    """The block in eval mode, float64, wired as `wiring` says (WIRING_CHOICES); `attended`: a cache of the
    attention's output for each input (shared by the members of a family, which differ after it)."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()

    def norm(name: str, t: Tensor) -> Tensor:
        return F.layer_norm(t, (x.shape[-1],), s[f"{name}.weight"], s[f"{name}.bias"], eps=1e-5)

    def ff(t: Tensor) -> Tensor:
        return linear(F.relu(linear(t, s, "ff.0")), s, "ff.2")

    attn_in, first, ff_in, second = wiring
    attended = {} if attended is None else attended
    n1x = norm("norm1", x)
    if attn_in not in attended:
        attended[attn_in] = mha(s, {"norm1(x)": n1x, "x": x}.get(attn_in) if attn_in != "norm2(x)" else
                                norm("norm2", x), mask, n_heads, prefix="attention.")[0]
    a = attended[attn_in]
    h = {"x + ": x + a, "norm1(x) + ": n1x + a, "": a}[first]
    f = ff({"norm2(h)": norm("norm2", h), "norm2(x)": norm("norm2", x), "h": h, "x": x,
            "norm1(h)": norm("norm1", h)}[ff_in])
    return {"h + ": h + f, "x + ": x + f, "norm2(h) + ": norm("norm2", h) + f, "": f}[second]


def _wiring_family(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int) -> Mistakes:
    attended: dict[str, Tensor] = {}
    return {WIRING.text(attn_in=w[0], first=w[1], ff_in=w[2], second=w[3]):
            (lambda w=w: wired_block(state, x, mask, n_heads, w, attended))
            for w in itertools.product(*WIRING_CHOICES) if w != RIGHT_WIRING}


def block_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, got: Any = None
                   ) -> Mistakes:
    """For the block's output on x (which was `got`); also every other wiring of its dataflow (WIRING), which
    says nothing where it is what a named mistake gives."""
    simulate = lambda **switches: block(state, x, mask, n_heads, **switches)  # noqa: E731
    named = {**simulated(BLOCK_MISTAKES, simulate), **squeeze_mistakes(x)}
    return besides(named, {**_wiring_family(state, x, mask, n_heads), **_activation_family(simulate)}, got)


def block_grad_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                        grad_output: Tensor) -> Mistakes:
    """For the gradient of sum(block(x) * grad_output) w.r.t. x: what each named mistake's block gives there (the
    WIRING family, a backward pass each, is weighed on the output only)."""
    def grad_of(variant: str) -> Tensor:
        inputs = x.detach().double().requires_grad_(True)
        with torch.enable_grad():
            out = block(state, inputs, mask, n_heads, variant=variant)
            (grad,) = torch.autograd.grad((out * grad_output.double()).sum(), inputs)
        return grad

    return {entry.sentence: (lambda v=entry.model["variant"]: grad_of(v)) for entry in BLOCK_MISTAKES}


def ff_width_mistakes(key: str, d_model: int, n_heads: int, d_ff: int) -> Mistakes:
    """For the shape of state_dict()[key] of TransformerBlock(d_model, n_heads, d_ff): a feed-forward layer sized
    with other widths among the block's (LINEAR_WIDTHS)."""
    want = {"ff.0.weight": ("d_model", "d_ff"), "ff.2.weight": ("d_ff", "d_model")}.get(key)
    if want is None:
        return {}
    widths = {"d_model": d_model, "d_ff": d_ff, "4 * d_model": 4 * d_model, "n_heads": n_heads}
    return linear_width_mistakes(key.removesuffix(".weight"), want, widths)


# A family: one branch not dropped out (self.dropout forgotten around it), seen with dropout=1.0 in train mode.
BRANCH_NOT_DROPPED = mistake(
    "pre_ln_block", "branch_not_dropped",
    "your block does not drop out the branch {term}: with dropout=1.0 in train mode it gave x + {term}; apply "
    "self.dropout to each branch before adding it, x + dropout(branch)", dict())


def dropped_residual_mistakes(x: Tensor, state: dict[str, Tensor] | None = None, n_heads: int = 0) -> Mistakes:
    """For a block's output on x with dropout=1.0 in train mode (which must be x); given the block's weights,
    also one branch kept (BRANCH_NOT_DROPPED)."""
    mistakes = bind([RESIDUAL_DROPPED], x)
    if state is not None:
        s = {k: v.double() for k, v in state.items()}
        xd = x.double()

        def norm(name: str) -> Tensor:
            return F.layer_norm(xd, (xd.shape[-1],), s[f"{name}.weight"], s[f"{name}.bias"], eps=1e-5)
        terms = {"attention(norm1(x))": lambda: xd + mha(s, norm("norm1"), None, n_heads, prefix="attention.")[0],
                 "ff(norm2(x))": lambda: xd + linear(F.relu(linear(norm("norm2"), s, "ff.0")), s, "ff.2")}
        mistakes.update({BRANCH_NOT_DROPPED.text(term=term): model for term, model in terms.items()})
    return mistakes


def squeeze_mistakes(x: Tensor) -> Mistakes:
    """For the shape of a block's output on x (B, T, D)."""
    return bind([SQUEEZED_BATCH], x)


def shared_norm_mistakes(state: dict[str, Tensor], key: str) -> Mistakes:
    """For state_dict()[key] of a norm after loading different norm1 and norm2 weights."""
    return bind([ONE_NORM_OBJECT], state, key)


# --- patch_embedding ---------------------------------------------------------------------------------

def patches(images: Tensor, patch: int, order: tuple[int, ...] = (0, 2, 4, 1, 3, 5), strided: str = "") -> Tensor:
    """Patchify with the dims of (B, C, h, P1, w, P2) permuted by `order` before flattening to (B, N, C*P*P);
    `strided` "rows", "columns" or "both": that side split as (P, H/P), so a patch takes every (H/P)-th pixel."""
    b, c, height, width = images.shape
    if strided:
        rows, cols = strided in ("rows", "both"), strided in ("columns", "both")
        grid = images.reshape(b, c, *((patch, height // patch) if rows else (height // patch, patch)),
                              *((patch, width // patch) if cols else (width // patch, patch)))
        images = grid.permute(0, 1, *((3, 2) if rows else (2, 3)), *((5, 4) if cols else (4, 5))).reshape(images.shape)
    grid = images.reshape(b, c, height // patch, patch, width // patch, patch).permute(*order)
    return grid.reshape(b, (height // patch) * (width // patch), c * patch * patch)


PATCH_MISTAKES = (
    mistake("patch_embedding", "channels_innermost",
            "your patches are flattened pixel by pixel with the channels innermost, (P, P, C): "
            "flatten each patch channel first, (C, P, P)", dict(order=(0, 2, 4, 3, 5, 1))),
    mistake("patch_embedding", "patches_column_by_column",
            "your patches are numbered column by column: number them row by row (left to right, then top to bottom)",
            dict(order=(0, 4, 2, 1, 3, 5))),
    mistake("patch_embedding", "pixels_column_by_column",
            "the pixels of each of your patches are flattened column by column: flatten (C, P, P) row by row",
            dict(order=(0, 2, 4, 1, 5, 3))),
)
STRIDED_PATCHES = (
    mistake("patch_embedding", "strided_patches",
            "your patches take every (H/P)-th row and every (W/P)-th column of the image ((p1 h) (p2 w) in einops, "
            "or a view as (P, H/P)): a patch is P adjacent rows and columns, b c (h p1) (w p2) -> b (h w) (c p1 p2)",
            dict(strided="both")),
    mistake("patch_embedding", "strided_rows",
            "your patches take every (H/P)-th row of the image ((p1 h) in einops, or a view as (P, H/P)): a patch is "
            "P adjacent rows, b c (h p1) (w p2) -> b (h w) (c p1 p2)", dict(strided="rows")),
    mistake("patch_embedding", "strided_columns",
            "your patches take every (W/P)-th column of the image ((p2 w) in einops, or a view as (P, W/P)): a patch "
            "is P adjacent columns, b c (h p1) (w p2) -> b (h w) (c p1 p2)", dict(strided="columns")),
)
UNFOLD_LAYOUT = mistake("patch_embedding", "unfold_layout",
                        "you returned F.unfold's layout (B, C*P*P, N): transpose it to (B, N, C*P*P)",
                        lambda images, patch: F.unfold(images, patch, stride=patch))
# F.unfold's stride left at its default of 1: every P x P window, overlapping, not the image cut into patches
UNFOLD_STRIDE_1 = mistake("patch_embedding", "unfold_stride_1",
                          "your patches overlap: F.unfold(images, patch_size) slides by its default stride of 1, giving "
                          "every P x P window; cut the image into patches with F.unfold(images, patch_size, "
                          "stride=patch_size)", lambda images, patch: F.unfold(images.double(), patch).transpose(1, 2))


def _unfold_stride_1(images: Tensor, patch: int, model: Callable[[Tensor], Any] = lambda t: t) -> Mistakes:
    """UNFOLD_STRIDE_1 where it differs from the right patches (a side longer than one patch)."""
    if max(images.shape[-2:]) <= patch:
        return {}
    return {UNFOLD_STRIDE_1.sentence: lambda: model(UNFOLD_STRIDE_1.model(images, patch))}


NUM_PATCHES_MISTAKES = (
    mistake("patch_embedding", "num_patches_precedence",
            "your num_patches is img_size // patch_size**2: ** binds before //, so write (img_size // patch_size) ** 2",
            lambda img_size, patch: img_size // patch**2),
    mistake("patch_embedding", "num_patches_one_side",
            "your num_patches counts the patches along one side only: an image holds (img_size // patch_size) ** 2",
            lambda img_size, patch: img_size // patch),
)
PROJ_FOR_ONE_CHANNEL = mistake("patch_embedding", "proj_for_one_channel",
                               "proj is sized for one channel: a flattened patch holds in_channels * patch_size**2 "
                               "values", lambda patch, d_model: torch.Size((d_model, patch * patch)))


ONE_BAD_SIDE_LET_THROUGH = recognised(
    "patch_embedding", "one_bad_side_let_through",
    "your check lets an image through when only one of its sides is not a multiple of patch_size: reject it when "
    "either is, height % patch_size or width % patch_size (an and there lets one bad side through)")


def one_bad_side(height: int, width: int, size: int, entry: Mistake) -> dict[Mistake, bool]:
    """For a check that must reject a (height, width) map not divisible by `size`: `entry` (a check that lets
    one bad side through) lets this one through where exactly one side is bad."""
    return {entry: bool(height % size) != bool(width % size)}


def patchify_checks(height: int, width: int, patch: int) -> dict[Mistake, bool]:
    return one_bad_side(height, width, patch, ONE_BAD_SIDE_LET_THROUGH)


CHANNELS_UNCHECKED = recognised(
    "patch_embedding", "channels_unchecked",
    "your PatchEmbedding checks the image size but not the channels: images with another number of channels get "
    "through to proj; raise ValueError unless images.shape[1:] == (in_channels, img_size, img_size)")
SIZE_UNCHECKED = recognised(
    "patch_embedding", "size_unchecked",
    "your PatchEmbedding checks the channels but not the image size: images of another size get through; raise "
    "ValueError unless images.shape[1:] == (in_channels, img_size, img_size)")


def embedding_checks(channels_wrong: bool) -> dict[Mistake, bool]:
    """For PatchEmbedding given wrong images: a check of one property only lets the other one's through."""
    return {CHANNELS_UNCHECKED: channels_wrong, SIZE_UNCHECKED: not channels_wrong}


SQUARE_ASSUMED = recognised("patch_embedding", "square_assumed",
                            "your patchify takes the number of patches per side from one side of the image, as if "
                            "every image were square: there are H / P rows and W / P columns of patches")


def square_assumed(message: str, images_shape: tuple[int, ...], patch: int) -> bool:
    """Whether an error says that (B, C, H, W) images were viewed with one side's patch count for both sides."""
    b, c, height, width = images_shape
    shape = re.search(r"shape '\[([\d, ]+)\]' is invalid", message)
    if height == width or shape is None:
        return False
    dims = [int(d) for d in shape[1].split(",")]
    return any(dims == [b, c, side // patch, patch, side // patch, patch] for side in (height, width))


# A family: the view (B, C, H/P, Py, W/P, Px) flattened in any other order, each order its own sentence.
PATCH_ORDER = mistake(
    "patch_embedding", "patch_order",
    "your patchify flattens the view (B, C, H/P, Py, W/P, Px) in the order ({names}), permute(0, {order}) "
    "(Py, Px: a pixel's row and column in its patch): the patches are (B, H/P, W/P, C, Py, Px) flattened, "
    "permute(0, 2, 4, 1, 3, 5), row-major patches of (C, P, P) each", dict())
PATCH_AXES = ("B", "C", "H/P", "Py", "W/P", "Px")
PATCH_NAMED = {(0, 2, 4, 1, 3, 5), *(m.model["order"] for m in PATCH_MISTAKES)}


def _patch_orders(images: Tensor, patch: int, model: Callable[[tuple[int, ...]], Any]) -> Mistakes:
    """The PATCH_ORDER family, where no axis of the view has size 1 (then every order gives its own patches)."""
    b, c, height, width = images.shape
    if min(b, c, height // patch, patch, width // patch) < 2:
        return {}
    return {text: (lambda order=order: model(order)) for text, order in _patch_order_texts()}


@functools.cache
def _patch_order_texts() -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((PATCH_ORDER.text(names=", ".join(PATCH_AXES[i] for i in (0, *rest)), order=", ".join(map(str, rest))),
                  (0, *rest)) for rest in itertools.permutations(range(1, 6)) if (0, *rest) not in PATCH_NAMED)


def patchify_mistakes(images: Tensor, patch: int, got: Any = None) -> Mistakes:
    """For patchify(images, patch) (which gave `got`); also every other order of the view (PATCH_ORDER)."""
    named = {**simulated(PATCH_MISTAKES, lambda order: patches(images, patch, order)),
             **_strided(images, patch, lambda **kw: patches(images, patch, **kw)),
             **bind([UNFOLD_LAYOUT], images, patch), **_unfold_stride_1(images, patch)}
    return besides(named, _patch_orders(images, patch, lambda order: patches(images, patch, order)), got)


def _strided(images: Tensor, patch: int, model: Callable[..., Any]) -> Mistakes:
    """STRIDED_PATCHES, where the strided side has more than one patch (with one, a strided patch is a patch)."""
    rows, cols = (size // patch > 1 for size in images.shape[-2:])
    return simulated([m for m in STRIDED_PATCHES if {"rows": rows, "columns": cols, "both": rows and cols}[
        m.model["strided"]]], model)


def embedding_mistakes(images: Tensor, patch: int, state: dict[str, Tensor], got: Any = None) -> Mistakes:
    def model(order=(0, 2, 4, 1, 3, 5), strided=""):
        return linear(patches(images, patch, order, strided), state, "proj")
    return besides({**simulated(PATCH_MISTAKES, model), **_strided(images, patch, model),
                    **_unfold_stride_1(images, patch, lambda t: linear(t, state, "proj"))},
                   _patch_orders(images, patch, model), got)


PATCHES_KEPT = mistake(
    "patch_embedding", "patches_kept",
    "your PatchEmbedding keeps the patches of an earlier call on the module and embeds them again for other images "
    "of the same shape: patchify each call's own images, and keep nothing of one call's input for the next",
    lambda earlier, patch, state: linear(patches(earlier, patch, (0, 2, 4, 1, 3, 5), ""), state, "proj"))


def embedding_again_mistakes(images: Tensor, patch: int, state: dict[str, Tensor], earlier: Tensor,
                             got: Any = None) -> Mistakes:
    """For PatchEmbedding called on `images` after a first call on `earlier`, of the same shape."""
    stale = {} if torch.equal(images, earlier) else bind([PATCHES_KEPT], earlier, patch, state)
    return {**embedding_mistakes(images, patch, state, got), **stale}


def num_patches_mistakes(img_size: int, patch: int) -> Mistakes:
    return bind(NUM_PATCHES_MISTAKES, img_size, patch)


def proj_shape_mistakes(patch: int, d_model: int, channels: int | None = None, img_size: int | None = None
                        ) -> Mistakes:
    """For proj.weight's shape; given the channels and image size, also proj sized with other widths among
    those of the patches (LINEAR_WIDTHS; proj_for_one_channel is one of them)."""
    named = bind([PROJ_FOR_ONE_CHANNEL], patch, d_model)
    if channels is None or img_size is None:
        return named
    widths = {"in_channels * patch_size**2": channels * patch * patch, "patch_size**2": patch * patch,
              "in_channels * patch_size": channels * patch, "in_channels * patch_size * 2": channels * patch * 2,
              "in_channels": channels, "patch_size": patch, "d_model": d_model, "img_size": img_size,
              "num_patches": (img_size // patch) ** 2}
    layer, want = "proj", ("in_channels * patch_size**2", "d_model")
    family = linear_width_mistakes(layer, want, widths)
    family.pop(LINEAR_WIDTHS.text(layer=layer, got_in="patch_size**2", got_out=want[1],  # proj_for_one_channel
                                  want_in=want[0], want_out=want[1]))
    return {**named, **family}


# --- kv_cache ----------------------------------------------------------------------------------------

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
        mistakes[FIRST_CHUNK_TWICE.sentence] = lambda: torch.cat([chunks[0], *chunks], dim=-2)
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

    return {entry.sentence: (lambda entry=entry: lengths(entry)) for entry in (*CACHE_LEN_MISTAKES, FIRST_CHUNK_TWICE)}


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


def heads(x: Tensor, n_heads: int) -> Tensor:
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


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


# --- layer_norm --------------------------------------------------------------------------------------

UNSHIELDED_SQRT = ("no_eps", "unbiased_no_eps", "eps_outside_sqrt", "std_plus_eps")  # sqrt(var) alone


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, variant: str = "") -> Tensor | None:
    """LayerNorm over the last dimension in float64, with the mistake `variant` switched on.

    `naive_variance` is computed in x's own dtype: its error is float32's cancellation in E[x²] - E[x]². None
    for a variant without eps under the square root on a float32 x with a constant row: there float32's rounding
    of the variance (0 or not) decides the result (NaN, or noise over a tiny denominator), which float64 cannot
    reproduce.
    """
    if x.dtype == torch.float32 and variant in UNSHIELDED_SQRT and bool((x == x[..., :1]).all(dim=-1).any()):
        return None
    if variant == "naive_variance":
        w, b = weight.to(x.dtype), bias.to(x.dtype)
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        return ((x - mean) / torch.sqrt(var + eps) * w + b).double()
    x, w, b = x.double(), weight.double(), bias.double()
    if variant in ("affine_first", "affine_twice"):  # weight and bias applied to x, the result normalised
        x = x * w + b
        if variant == "affine_first":
            w, b = torch.ones_like(w), torch.zeros_like(b)
    if variant in ("mean_over_dim0", "mean_over_dim1", "global_mean_only"):  # the mean over other axes, the
        # variance around it, over the features
        mean = x.mean() if variant == "global_mean_only" else x.mean(dim=int(variant[-1]), keepdim=True)
        return (x - mean) / torch.sqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + eps) * w + b
    dims = {"global_statistics": tuple(range(x.dim())),
            "per_sample_statistics": tuple(range(1, x.dim())) or (-1,)}.get(variant, (-1,))
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=variant in ("unbiased", "std_plus_eps", "unbiased_no_eps"))
    if variant == "std_plus_eps":
        variant = "eps_outside_sqrt"
    elif variant == "unbiased_no_eps":
        variant = "no_eps"
    if variant == "rms_denominator":
        var = x.pow(2).mean(dim=-1, keepdim=True)
    if variant == "no_eps":
        eps = 0.0
    if variant == "default_eps_1e-6":
        eps = 1e-6
    denominator = torch.sqrt(var) + eps if variant == "eps_outside_sqrt" else (
        var + eps if variant == "no_sqrt" else 2 * (var + eps) if variant == "half_power" else torch.sqrt(var + eps))
    normed = (x - mean) / denominator
    if variant == "no_mean":
        normed = x / denominator
    if variant == "weight_bias_swapped":
        return normed * b + w
    if variant == "no_bias":
        return normed * w
    if variant == "no_weight":
        return normed + b
    if variant == "one_plus_weight":
        return normed * (1 + w) + b
    if variant == "bias_before_weight":
        return (normed + b) * w
    return normed * w + b


LAYER_NORM_MISTAKES = variants("layer_norm", (
    ("your variance is the unbiased one (divides by D - 1, torch.var's default); LayerNorm's is biased: "
     "the mean of (x - mean)**2, torch.var(..., unbiased=False)", "unbiased"),
    ("your eps is added after the square root, (x - mean) / (sqrt(var) + eps); it belongs inside: "
     "sqrt(var + eps)", "eps_outside_sqrt"),
    ("your LayerNorm ignores eps: (x - mean) / sqrt(var), which divides by zero on a constant row", "no_eps"),
    ("your LayerNorm divides by var + eps, not by its square root", "no_sqrt"),
    ("your mean and variance are taken over the whole tensor; LayerNorm takes them per position, "
     "over the last dimension only (dim=-1, keepdim=True)", "global_statistics"),
    ("your mean and variance are taken per sample, over every dimension but the first (as "
     "nn.LayerNorm(x.shape[1:]) would): LayerNorm takes them per position, over the last dimension only "
     "(dim=-1, keepdim=True)", "per_sample_statistics"),
    ("your mean is taken over dimension 0 instead of the features: LayerNorm's statistics are per position, "
     "over the last dimension (dim=-1, keepdim=True)", "mean_over_dim0"),
    ("your mean is taken over dimension 1 instead of the features: LayerNorm's statistics are per position, "
     "over the last dimension (dim=-1, keepdim=True)", "mean_over_dim1"),
    ("your mean is taken over the whole tensor (x.mean(), no dim) while the variance is per position: both "
     "statistics are per position, over the last dimension (dim=-1, keepdim=True)", "global_mean_only"),
    ("your LayerNorm multiplies by bias and adds weight: it is * weight + bias", "weight_bias_swapped"),
    ("your LayerNorm never adds bias", "no_bias"),
    ("your LayerNorm adds bias before it multiplies by weight, (normed + bias) * weight: the weight scales "
     "the normalised x, then the bias shifts it, normed * weight + bias", "bias_before_weight"),
    ("your LayerNorm never multiplies by weight", "no_weight"),
    ("your LayerNorm divides by the root mean square of x, not by its standard deviation: the variance is "
     "the mean of (x - mean)**2, not of x**2", "rms_denominator"),
    ("your LayerNorm does not subtract the mean: (x - mean) / sqrt(var + eps)", "no_mean"),
    ("your LayerNorm divides by x.std() + eps: torch's std is the unbiased one (D - 1) and eps belongs under the "
     "square root; it is (x - mean) / sqrt(var + eps), var the biased variance, x.var(dim=-1, unbiased=False)",
     "std_plus_eps"),
    ("your LayerNorm divides by the unbiased standard deviation without eps: it is (x - mean) / sqrt(var + eps), "
     "var the biased variance, x.var(dim=-1, unbiased=False)", "unbiased_no_eps"),
    ("your LayerNorm scales by (1 + weight), Gemma's convention for a weight that starts at 0: here weight starts "
     "at 1 and scales directly, (x - mean) / sqrt(var + eps) * weight + bias", "one_plus_weight"),
    ("your variance is E[x²] - E[x]², which cancels catastrophically in float32 when the inputs sit far "
     "from zero: average the squared deviations (x - mean)**2 instead", "naive_variance"),
    ("your LayerNorm applies weight and bias to x before it normalises, so the normalisation undoes them: "
     "normalise first, then scale and shift, (x - mean) / sqrt(var + eps) * weight + bias", "affine_first"),
    ("your LayerNorm applies weight and bias twice, to x before it normalises and again after: only after, "
     "(x - mean) / sqrt(var + eps) * weight + bias", "affine_twice"),
    ("your LayerNorm divides by 2 (var + eps): Python reads (var + eps) ** 1 / 2 as ((var + eps) ** 1) / 2 "
     "(** binds tighter than /); the square root is ** 0.5, ** (1 / 2) or torch.sqrt", "half_power"),
))
# a switch of both layer_norm() and rms_norm(): the checks of either component see it
DEFAULT_EPS = mistake("layer_norm", "default_eps_1e-6",
                      "your default eps is 1e-6; the contract's (and nn.LayerNorm's, nn.RMSNorm's here) is 1e-5",
                      dict(variant="default_eps_1e-6"))
STATISTICS_DETACHED = mistake(
    "layer_norm", "statistics_detached",
    "your {what} detached from the graph (.detach(), torch.no_grad() or .item()): the forward is "
    "right, but the gradient must flow through the statistics too",
    lambda x, state, eps, grad_output, rms: statistics_detached_x_grad(x, state, eps, grad_output, rms=rms))
MEAN_DETACHED = mistake(
    "layer_norm", "mean_detached",
    "your mean is detached from the graph (.detach(), torch.no_grad() or .item()): the forward is "
    "right, but the gradient must flow through the mean too",
    lambda x, state, eps, grad_output: statistics_detached_x_grad(x, state, eps, grad_output, mean_only=True))
CENTRED_IN_PLACE = mistake("layer_norm", "centred_in_place",
                           "your LayerNorm subtracted the mean from the caller's x in place (x -= mean or x.sub_): "
                           "compute x - mean as a new tensor",
                           lambda x: x.double() - x.double().mean(dim=-1, keepdim=True))
PLAIN_TENSORS = mistake("layer_norm", "parameters_plain_tensors",
                        "your {name}'s parameters are plain tensors (or not created): wrap them in nn.Parameter "
                        "so that they are trained and saved", lambda: set())
NO_BIAS_PARAMETER = mistake("layer_norm", "no_bias_parameter",
                            "your LayerNorm has no bias parameter: it needs both weight (ones) and bias (zeros)",
                            lambda: {"weight"})
RMS_NORM_BIAS = mistake("rms_norm", "has_bias",
                        "your RMSNorm has a bias; RMSNorm has only weight (no shift, as no mean is subtracted)",
                        lambda: {"weight", "bias"})
INITIAL_VALUE = mistake("layer_norm", "initial_value",
                        "your {name} starts at {bad:g}s; it starts at {good:g}s, so that a fresh norm only normalises",
                        lambda d, bad: torch.full((d,), bad))


# A family of both norms: an eps written into the code, whatever eps the norm is given.
FIXED_EPS = mistake("layer_norm", "fixed_eps",
                    "your eps is {eps} whatever eps the norm is given: use the one passed to __init__ (self.eps)",
                    dict())
FIXED_EPS_VALUES = (1e-5, 1e-6, 1e-8, 1e-3)


def _fixed_eps(norm: Callable[[float], Tensor], named: Mistakes, got: Any, default_eps: bool) -> Mistakes:
    """`named` and the FIXED_EPS family; 1e-6 is DEFAULT_EPS's where the default is used. An eps next to 0 is
    no eps on most inputs: where the two give the same, neither is named."""
    family = {FIXED_EPS.text(eps=f"{value:g}".replace("e-0", "e-")): (lambda value=value: norm(value))
              for value in FIXED_EPS_VALUES if not (default_eps and value == 1e-6)}
    return besides(named, family, got, prefer_named=False)


# A family of both norms: a statistic reduced over another axis than the features, as written in the code
# (dim=0, dim=1, dim=-2; keepdim kept). A dim that the input lacks says nothing; where two dims are the same
# axis (dim=1 and dim=-2 of a 3-d input) both are weighed, and the other cases tell them apart.
NORM_AXES = (0, 1, -2)
LN_VARIANCE_AXIS = mistake(
    "layer_norm", "variance_axis",
    "your variance is taken over dim={dim} while the mean is over the features: both statistics are per "
    "position, over the last dimension (dim=-1, keepdim=True)", dict())
LN_STATISTICS_AXIS = mistake(
    "layer_norm", "statistics_axis",
    "your mean and variance are taken over dim={dim} instead of the features: LayerNorm's statistics are per "
    "position, over the last dimension (dim=-1, keepdim=True)", dict())
LN_MEAN_AXIS = mistake(
    "layer_norm", "mean_axis",
    "your mean is taken over dim={dim} instead of the features: LayerNorm's statistics are per position, "
    "over the last dimension (dim=-1, keepdim=True)", dict())
RMS_AXIS = mistake(
    "rms_norm", "mean_square_axis",
    "your mean square is taken over dim={dim} instead of the features: RMSNorm's is per position, over the "
    "last dimension (dim=-1, keepdim=True)", dict())


def _axis_layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float, mean_dim: int, var_dim: int
                     ) -> Tensor | None:
    """LayerNorm in float64 with its mean over `mean_dim` and the variance (around that mean) over `var_dim`;
    None where x lacks one of those dims."""
    if x.dim() < 2 or max(mean_dim, var_dim) >= x.dim():
        return None
    x = x.double()
    mean = x.mean(dim=mean_dim, keepdim=True)
    var = (x - mean).pow(2).mean(dim=var_dim, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()


def layer_norm_axis_family(x: Tensor, state: dict[str, Tensor], eps: float) -> Mistakes:
    """LN_VARIANCE_AXIS, LN_STATISTICS_AXIS and LN_MEAN_AXIS (dim=-2 only: mean_over_dim0/1 name the others)."""
    w, b = state["weight"], state["bias"]
    family: Mistakes = {}
    for dim in NORM_AXES:
        family[LN_VARIANCE_AXIS.text(dim=dim)] = lambda dim=dim: _axis_layer_norm(x, w, b, eps, -1, dim)
        family[LN_STATISTICS_AXIS.text(dim=dim)] = lambda dim=dim: _axis_layer_norm(x, w, b, eps, dim, dim)
    family[LN_MEAN_AXIS.text(dim=-2)] = lambda: _axis_layer_norm(x, w, b, eps, -2, -1)
    return family


def rms_norm_axis_family(x: Tensor, state: dict[str, Tensor], eps: float) -> Mistakes:
    """RMS_AXIS: the mean square over dim=0, 1 or -2."""
    def model(dim: int) -> Tensor | None:
        if x.dim() < 2 or dim >= x.dim():
            return None
        xd = x.double()
        return xd / torch.sqrt(xd.pow(2).mean(dim=dim, keepdim=True) + eps) * state["weight"].double()
    return {RMS_AXIS.text(dim=dim): (lambda dim=dim: model(dim)) for dim in NORM_AXES}


def layer_norm_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, *, default_eps: bool = False,
                        got: Any = None) -> Mistakes:
    """For LayerNorm(x) with this eps (which gave `got`); also an eps of FIXED_EPS_VALUES written into the code
    and a statistic over another axis (layer_norm_axis_family)."""
    named = besides(simulated([*LAYER_NORM_MISTAKES, *([DEFAULT_EPS] if default_eps else [])],
                              lambda variant: layer_norm(x, state["weight"], state["bias"], eps, variant=variant)),
                    layer_norm_axis_family(x, state, eps), got)
    precision = lower_precision_mistakes(
        "LayerNorm", lambda dtype: F.layer_norm(x.to(dtype), x.shape[-1:], state["weight"].to(dtype),
                                                state["bias"].to(dtype), eps), x, got)
    fixed = _fixed_eps(lambda value: layer_norm(x, state["weight"], state["bias"], value), {}, got, default_eps)
    return {**_fixed_eps(lambda value: layer_norm(x, state["weight"], state["bias"], value), named, got, default_eps),
            **fitted_besides({**named, **fixed}, precision, got)}


def statistics_detached_x_grad(x: Tensor, state: dict[str, Tensor], eps: float, grad_output: Tensor, *,
                               rms: bool = False, mean_only: bool = False) -> Tensor:
    """d/dx of sum(norm(x) * grad_output) when the mean and variance (or mean square) are detached,
    or (`mean_only`) the mean alone, the variance being taken around the detached mean."""
    x = x.double().clone().requires_grad_(True)
    w = state["weight"].double()
    if rms:
        out = x * torch.rsqrt(x.detach().pow(2).mean(dim=-1, keepdim=True) + eps) * w
    else:
        mean = x.detach().mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True) if mean_only else \
            x.detach().var(dim=-1, keepdim=True, unbiased=False)
        out = (x - mean) / torch.sqrt(var + eps) * w + state["bias"].double()
    (out * grad_output.double()).sum().backward()
    return x.grad


def detached_statistics_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, grad_output: Tensor, *,
                                 rms: bool = False) -> Mistakes:
    mistakes = bind([STATISTICS_DETACHED], x, state, eps, grad_output, rms,
                    what="mean square is" if rms else "mean and variance are")
    if not rms:
        mistakes.update(bind([MEAN_DETACHED], x, state, eps, grad_output))
    return mistakes


def centred_in_place_mistakes(x: Tensor) -> Mistakes:
    return bind([CENTRED_IN_PLACE], x)


def norm_state_mistakes(keys: set[str], *, bias: bool) -> Mistakes:
    """For the set of state-dict keys of a norm."""
    return {**bind([PLAIN_TENSORS], name="LayerNorm" if bias else "RMSNorm"),
            **bind([NO_BIAS_PARAMETER if bias else RMS_NORM_BIAS])}


def initial_value_mistakes(d: int, name: str) -> Mistakes:
    good = 1.0 if name == "weight" else 0.0
    return bind([INITIAL_VALUE], d, 1.0 - good, name=name, bad=1.0 - good, good=good)


# --- rms_norm ----------------------------------------------------------------------------------------

def rms_norm(x: Tensor, weight: Tensor, eps: float, *, variant: str = "", power: float = -0.5,
             spread: bool | None = None) -> Tensor:
    """RMSNorm over the last dimension in float64, with the mistake `variant` switched on, or x scaled by
    (mean(x**2) + eps) ** `power` (a root or a mean square that multiplies), or (`spread`: unbiased or not)
    the mean square taken of x minus its mean, the variance, while x itself stays uncentred."""
    x, w = x.double(), weight.double()
    if power != -0.5 or spread is not None:
        ms = x.pow(2).mean(dim=-1, keepdim=True) if spread is None else x.var(dim=-1, keepdim=True, unbiased=spread)
        return x * (ms + eps) ** power * w
    if variant in ("weight_first", "weight_twice"):  # x scaled by weight, the result normalised
        x, w = x * w, (torch.ones_like(w) if variant == "weight_first" else w)
    if variant == "mean_subtracted":
        x = x - x.mean(dim=-1, keepdim=True)
    if variant == "no_eps":
        eps = 0.0
    if variant == "default_eps_1e-6":
        eps = 1e-6
    if variant == "global_mean":
        ms = x.pow(2).mean()
    elif variant in ("sum", "l2_norm"):
        ms = x.pow(2).sum(dim=-1, keepdim=True)
    elif variant == "abs_mean":
        ms = x.abs().mean(dim=-1, keepdim=True)
    elif variant == "square_of_mean":
        ms = x.mean(dim=-1, keepdim=True).pow(2)
    elif variant == "over_d_minus_1":
        ms = x.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)
    elif variant == "norm_over_d":  # the root taken as ||x|| / D, squared back
        ms = x.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1] ** 2
    else:
        ms = x.pow(2).mean(dim=-1, keepdim=True)
    if variant == "abs_mean":
        out = x / (ms + eps)
    elif variant in ("eps_outside_sqrt", "l2_norm"):
        out = x / (torch.sqrt(ms) + eps)
    elif variant == "no_sqrt":
        out = x / (ms + eps)
    elif variant == "half_power":
        out = x / (2 * (ms + eps))
    elif variant == "eps_added_after":
        out = x / torch.sqrt(ms) + eps
    else:
        out = x / torch.sqrt(ms + eps)
    if variant == "one_plus_weight":
        return out * (1 + w)
    if variant == "weight_added":
        return out + w
    return out if variant == "no_weight" else out * w


RMS_NORM_MISTAKES = variants("rms_norm", (
    ("your RMSNorm subtracts the mean first (that is LayerNorm without its bias); RMSNorm divides x itself "
     "by sqrt(mean(x**2) + eps)", "mean_subtracted"),
    ("your eps is added after the square root, x / (sqrt(mean(x**2)) + eps); it belongs inside: "
     "rsqrt(mean(x**2) + eps)", "eps_outside_sqrt"),
    ("your RMSNorm ignores eps, which divides by zero on an all-zero row", "no_eps"),
    ("your RMSNorm divides by the L2 norm plus eps, x.norm(dim=-1) + eps, which is √D times the root mean square: "
     "divide by sqrt(mean(x**2) + eps)", "l2_norm"),
    ("your RMSNorm divides by mean(x**2) + eps, not by its square root", "no_sqrt"),
    ("your mean square divides the sum of squares by D - 1: it is the mean, divided by D (x.pow(2).mean(-1))",
     "over_d_minus_1"),
    ("your root mean square is ||x|| / D: the mean divides the sum of squares by D, so the root is ||x|| / √D, "
     "sqrt(mean(x**2))", "norm_over_d"),
    ("your eps is added to the normalised x, x / sqrt(mean(x**2)) + eps; it belongs under the square root: "
     "x / sqrt(mean(x**2) + eps)", "eps_added_after"),
    ("your RMSNorm sums the squares instead of averaging them (that is the L2 norm): use mean(x**2)", "sum"),
    ("your mean square is taken over the whole tensor; RMSNorm takes it per position, over the last "
     "dimension only (dim=-1, keepdim=True)", "global_mean"),
    ("your RMSNorm never multiplies by weight", "no_weight"),
    ("your RMSNorm divides by the mean absolute value; it is the root of the mean of the squares", "abs_mean"),
    ("your RMSNorm squares the mean (mean(x)**2); it is the mean of the squares, mean(x**2)", "square_of_mean"),
    ("your RMSNorm scales by (1 + weight), Gemma's convention for a weight that starts at 0: here weight starts "
     "at 1 and scales directly, x / sqrt(mean(x**2) + eps) * weight", "one_plus_weight"),
    ("your RMSNorm adds weight to the normalised x; it multiplies: x / sqrt(mean(x**2) + eps) * weight",
     "weight_added"),
    ("your RMSNorm multiplies x by weight before it normalises, so the normalisation undoes the weight: "
     "normalise first, then scale, x / sqrt(mean(x**2) + eps) * weight", "weight_first"),
    ("your RMSNorm multiplies by weight twice, x before it normalises and the result again: only after, "
     "x / sqrt(mean(x**2) + eps) * weight", "weight_twice"),
    ("your RMSNorm scales x by 1 / (2 (mean(x**2) + eps)): Python reads m ** -1 / 2 as (m ** -1) / 2, and "
     "x / m ** 1 / 2 as x / m / 2 (** binds tighter than /); the root is ** -0.5, ** (-1 / 2) or torch.rsqrt",
     "half_power"),
))


SCALED_IN_PLACE = mistake("rms_norm", "scaled_in_place",
                          "your RMSNorm scaled the caller's x in place (x *= ... or x.mul_): compute a new tensor",
                          lambda x: x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5))


RMS_WITHOUT_KEEPDIM = recognised("rms_norm", "without_keepdim",
                                 "your mean square loses its last dim (mean(dim=-1) without keepdim=True), so the (...,) "
                                 "result broadcasts against the wrong dimension of x: x.pow(2).mean(dim=-1, "
                                 "keepdim=True), (..., 1)")
LAYER_NORM_WITHOUT_KEEPDIM = recognised("layer_norm", "without_keepdim",
                                        "your mean or variance loses its last dim (mean(dim=-1) without keepdim=True), "
                                        "so the (...,) result broadcasts against the wrong dimension of x: take both "
                                        "with keepdim=True, (..., 1)")


def scaled_in_place_mistakes(x: Tensor) -> Mistakes:
    """For x after RMSNorm(d, eps=1e-5)(x)."""
    return bind([SCALED_IN_PLACE], x)


# Families: the normaliser multiplying where it divides (x / torch.rsqrt(m) is x * sqrt(m)); the mean square
# taken around the mean, the variance, while x itself is not centred (mean_subtracted centres both).
RMS_FACTOR_INVERTED = mistake(
    "rms_norm", "factor_inverted",
    "your RMSNorm multiplies x by {factor} instead of dividing by sqrt(mean(x**2) + eps) (x / torch.rsqrt(m) is "
    "x * sqrt(m): rsqrt is already 1 / sqrt): x * torch.rsqrt(mean(x**2) + eps) * weight, or x / torch.sqrt(...)",
    dict())
RMS_FACTORS = {"sqrt(mean(x**2) + eps)": 0.5, "mean(x**2) + eps": 1.0}
RMS_OF_SPREAD = mistake(
    "rms_norm", "variance_denominator",
    "your RMSNorm divides x by sqrt({variance} + eps), the spread of x around its mean (the mean is subtracted "
    "inside the mean square only): RMSNorm's denominator is the root mean square of x itself, "
    "sqrt(mean(x**2) + eps), with no mean subtracted anywhere", dict())
RMS_SPREADS = {"mean((x - mean(x))**2)": False, "x.var(dim=-1)": True}


def rms_norm_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, *, default_eps: bool = False,
                      got: Any = None) -> Mistakes:
    """For RMSNorm(x) with this eps (which gave `got`); also an eps of FIXED_EPS_VALUES written into the code,
    the normaliser multiplying (RMS_FACTORS) and the variance for the mean square (RMS_SPREADS)."""
    entries = list(RMS_NORM_MISTAKES)
    if bool((x > 0).all()):  # mean(|x|) is mean(x) there: the two mistakes cannot be told apart
        entries = [m for m in entries if m.model["variant"] not in ("abs_mean", "square_of_mean")]
    if default_eps:
        entries.append(DEFAULT_EPS)
    family = {RMS_FACTOR_INVERTED.text(factor=text): (lambda p=p: rms_norm(x, state["weight"], eps, power=p))
              for text, p in RMS_FACTORS.items()}
    family.update({RMS_OF_SPREAD.text(variance=text): (lambda u=u: rms_norm(x, state["weight"], eps, spread=u))
                   for text, u in RMS_SPREADS.items()})
    family.update(rms_norm_axis_family(x, state, eps))
    named = besides(simulated(entries, lambda variant: rms_norm(x, state["weight"], eps, variant=variant)), family)
    precision = lower_precision_mistakes(
        "RMSNorm", lambda dtype: F.rms_norm(x.to(dtype), x.shape[-1:], state["weight"].to(dtype), eps), x, got)
    fixed = _fixed_eps(lambda value: rms_norm(x, state["weight"], value), {}, got, default_eps)
    return {**_fixed_eps(lambda value: rms_norm(x, state["weight"], value), named, got, default_eps),
            **fitted_besides({**named, **fixed}, precision, got)}


# --- swiglu ------------------------------------------------------------------------------------------

def swiglu(x: Tensor, state: dict[str, Tensor], *, variant: str = "",
           activation: Callable[[Tensor], Tensor] | None = None, extra_silu: str = "") -> Tensor:
    """The contract's SwiGLU in float64, with the mistake `variant` switched on, or the gate through another
    `activation`, or silu applied once more at `extra_silu` (one of EXTRA_SILU_PLACES)."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()
    gate, up = F.linear(x, s["w_gate.weight"]), F.linear(x, s["w_up.weight"])
    if extra_silu:
        hidden = F.silu(gate) * (F.silu(up) if extra_silu == "w_up(x)" else up)
        out = F.linear(F.silu(hidden) if extra_silu.startswith("silu") else hidden, s["w_down.weight"])
        return F.silu(out) if extra_silu == "w_down(...)" else out
    activation = activation or {"sigmoid": torch.sigmoid, "relu": F.relu, "gelu": F.gelu,
                                "no_activation": lambda z: z}.get(variant, F.silu)
    if variant == "silu_on_up":
        hidden = gate * F.silu(up)
    elif variant == "sum":
        hidden = F.silu(gate) + up
    elif variant == "no_up":
        hidden = F.silu(gate)
    elif variant == "silu_after_product":
        hidden = F.silu(gate * up)
    elif variant == "gate_for_both":
        hidden = F.silu(gate) * gate
    elif variant == "up_for_both":
        hidden = F.silu(up) * up
    elif variant == "silu_on_output":
        return F.silu(F.linear(gate * up, s["w_down.weight"]))
    else:
        hidden = activation(gate) * up
    return F.linear(hidden, s["w_down.weight"])


SWIGLU_MISTAKES = variants("swiglu", (
    ("your silu is applied to w_up's projection; it belongs on the gate: silu(w_gate(x)) * w_up(x) "
     "(or your w_gate and w_up are swapped)", "silu_on_up"),
    ("your gate uses sigmoid (the original GLU); SwiGLU's is silu(z) = z * sigmoid(z)", "sigmoid"),
    ("your gate uses ReLU (that is ReGLU); SwiGLU's is silu", "relu"),
    ("your gate uses GELU (that is GeGLU); SwiGLU's is silu", "gelu"),
    ("your gate has no activation (a bilinear layer): apply silu to w_gate(x)", "no_activation"),
    ("your hidden layer adds the two projections; a gated unit multiplies them elementwise", "sum"),
    ("your hidden layer is silu(w_gate(x)) alone: multiply it by w_up(x)", "no_up"),
    ("your silu is applied to the product; only the gate goes through it: silu(w_gate(x)) * w_up(x)",
     "silu_after_product"),
    ("your hidden layer is silu(w_gate(x)) * w_gate(x): w_gate serves both branches (a copy-paste?), the second "
     "factor is w_up(x)", "gate_for_both"),
    ("your hidden layer is silu(w_up(x)) * w_up(x): w_up serves both branches (a copy-paste?), the gate is "
     "silu(w_gate(x))", "up_for_both"),
    ("your silu is applied to the output, silu(w_down(w_gate(x) * w_up(x))), instead of the gate: the activation "
     "gates the hidden layer, w_down(silu(w_gate(x)) * w_up(x)), and the output is w_down's as it is",
     "silu_on_output"),
))
SWIGLU_BIASES = mistake("swiglu", "biases", "your layers have biases: SwiGLU's three nn.Linear are created with bias=False",
                        lambda expected: expected | {k.replace(".weight", ".bias") for k in expected})
W_DOWN_TRANSPOSED = mistake("swiglu", "w_down_transposed",
                            "your w_down maps d_model to d_ff; it maps the hidden d_ff features back to d_model: "
                            "nn.Linear(d_ff, d_model)", lambda d_model, d_ff: torch.Size((d_ff, d_model)))
W_IN_TRANSPOSED = mistake("swiglu", "w_in_transposed",
                          "your {layer} maps d_ff to d_model; it maps x's d_model features up to d_ff: "
                          "nn.Linear(d_model, d_ff)", lambda d_model, d_ff: torch.Size((d_model, d_ff)))
GATE_DETACHED = mistake("swiglu", "gate_detached",
                        "your gate is detached from the graph (.detach() or torch.no_grad()): the forward is right, but "
                        "no gradient flows through silu(w_gate(x)), so w_gate never learns",
                        lambda x, state, grad_output: swiglu_detached_gate_x_grad(x, state, grad_output))


# Families: some of the layers with a bias (all three is SWIGLU_BIASES); the hidden layer sized by another
# width in scope than d_ff (LLaMA's 2/3 rule applied to a d_ff the caller already chose, d_model, GPT's 4 * d_model,
# a fused gate-and-up width, ...).
SWIGLU_LAYER_BIAS = mistake("swiglu", "layer_bias",
                            "your {layers} has a bias (nn.Linear's default bias=True): SwiGLU's three nn.Linear are "
                            "created with bias=False", dict())
SWIGLU_HIDDEN_WIDTH = mistake("swiglu", "hidden_width",
                              "your hidden layer is {expr} wide: SwiGLU(d_model, d_ff) uses d_ff itself as the hidden "
                              "width, nn.Linear(d_model, d_ff) for w_gate and w_up and nn.Linear(d_ff, d_model) for "
                              "w_down (the caller has already chosen d_ff: no 2/3 rule, no rounding)", dict())
SWIGLU_LAYERS = ("w_gate", "w_up", "w_down")
HIDDEN_WIDTHS: dict[str, Callable[[int, int], int]] = {
    "int(2 * d_ff / 3)": lambda d, f: int(2 * f / 3), "d_model": lambda d, f: d, "4 * d_model": lambda d, f: 4 * d,
    "int(8 * d_model / 3)": lambda d, f: int(8 * d / 3), "2 * d_ff": lambda d, f: 2 * f, "d_ff // 2": lambda d, f: f // 2,
    "256 * ceil(int(2 * d_ff / 3) / 256)": lambda d, f: 256 * -(-int(2 * f / 3) // 256)}


def swiglu_shapes(d_model: int, hidden: int) -> dict[str, tuple[int, ...]]:
    """The weights' shapes of a SwiGLU whose hidden layer is `hidden` wide."""
    return {"w_gate.weight": (hidden, d_model), "w_up.weight": (hidden, d_model), "w_down.weight": (d_model, hidden)}


def swiglu_width_mistakes(d_model: int, d_ff: int, key: str | None = None) -> Mistakes:
    """For the shapes of the weights (a dict key -> shape), or (`key`) the torch.Size of one of them: each other
    width of HIDDEN_WIDTHS that differs from d_ff."""
    widths = {expr: fn(d_model, d_ff) for expr, fn in HIDDEN_WIDTHS.items()}
    return {SWIGLU_HIDDEN_WIDTH.text(expr=expr): (lambda w=w: swiglu_shapes(d_model, w) if key is None
                                                  else torch.Size(swiglu_shapes(d_model, w)[key]))
            for expr, w in widths.items() if w != d_ff}


# A family: the gate through another activation than silu (sigmoid, ReLU and GELU are named entries).
SWIGLU_ACTIVATION = mistake("swiglu", "activation",
                            "your gate uses {fn}: SwiGLU's activation is silu(z) = z * sigmoid(z), F.silu", dict())
GATE_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "F.gelu(z, approximate='tanh')": lambda z: F.gelu(z, approximate="tanh"), "torch.tanh": torch.tanh,
    "F.softplus": F.softplus, "F.elu": F.elu, "F.leaky_relu": F.leaky_relu, "F.mish": F.mish,
    "F.hardswish": F.hardswish, "z * sigmoid(1.702 * z)": lambda z: z * torch.sigmoid(1.702 * z),
    # silu written out by hand, one slip each (the minus of exp(-z) lost, the 1 / (1 + ...) left out, a product
    # where silu divides)
    "z / (1 + torch.exp(z))": lambda z: z / (1 + torch.exp(z)), "z * torch.exp(-z)": lambda z: z * torch.exp(-z),
    "z * torch.exp(z)": lambda z: z * torch.exp(z), "z * (1 + torch.exp(-z))": lambda z: z * (1 + torch.exp(-z))}


# A family: silu on the gate and once more elsewhere (on w_up alone instead of the gate is silu_on_up).
SWIGLU_EXTRA_SILU = mistake("swiglu", "extra_silu",
                            "your silu is applied to {where} as well as to the gate: only w_gate(x) goes through it, "
                            "w_down(silu(w_gate(x)) * w_up(x))", dict())
EXTRA_SILU_PLACES = ("w_up(x)", "silu(w_gate(x)) * w_up(x)", "w_down(...)")  # the up branch, the product, the output


def swiglu_mistakes(x: Tensor, state: dict[str, Tensor]) -> Mistakes:
    """For SwiGLU(x) with these weights; also the gate through another activation (GATE_ACTIVATIONS), and silu
    applied once more somewhere (EXTRA_SILU_PLACES)."""
    family = {SWIGLU_ACTIVATION.text(fn=fn): (lambda act=act: swiglu(x, state, activation=act))
              for fn, act in GATE_ACTIVATIONS.items()}
    family.update({SWIGLU_EXTRA_SILU.text(where=where): (lambda w=where: swiglu(x, state, extra_silu=w))
                   for where in EXTRA_SILU_PLACES})
    return besides(simulated(SWIGLU_MISTAKES, lambda variant: swiglu(x, state, variant=variant)), family)


def swiglu_key_mistakes(expected: set[str]) -> Mistakes:
    """For the state-dict keys: all three layers with a bias, or some of them."""
    return besides(bind([SWIGLU_BIASES], expected), biased_layer_mistakes(SWIGLU_LAYER_BIAS, expected, SWIGLU_LAYERS))


def swiglu_shape_mistakes(d_model: int, d_ff: int, key: str) -> Mistakes:
    """For the shape of state_dict()[key]."""
    family = swiglu_width_mistakes(d_model, d_ff, key)
    if key == "w_down.weight":
        return {**bind([W_DOWN_TRANSPOSED], d_model, d_ff), **family}
    return {**bind([W_IN_TRANSPOSED], d_model, d_ff, layer=key.split(".")[0]), **family}


def swiglu_detached_gate_x_grad(x: Tensor, state: dict[str, Tensor], grad_output: Tensor) -> Tensor:
    s = {k: v.double() for k, v in state.items()}
    x = x.double().clone().requires_grad_(True)
    out = F.linear(F.silu(F.linear(x, s["w_gate.weight"])).detach() * F.linear(x, s["w_up.weight"]), s["w_down.weight"])
    (out * grad_output.double()).sum().backward()
    return x.grad


def swiglu_grad_mistakes(x: Tensor, state: dict[str, Tensor], grad_output: Tensor) -> Mistakes:
    return bind([GATE_DETACHED], x, state, grad_output)


# --- cross_entropy -----------------------------------------------------------------------------------
# The softmax mistakes are computed in the input's dtype, not float64: what goes wrong (an exp that
# overflows to inf, a softmax that underflows to 0 before its log) depends on the dtype's range.

def _naive_softmax(x: Tensor, dim: int) -> Tensor:
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def _other_than_last(dim: int, x: Tensor) -> bool:
    return dim % x.dim() != x.dim() - 1


def _sum_over_last(e: Tensor) -> Tensor:
    return e / e.sum(dim=-1, keepdim=True)


SOFTMAX_MISTAKES = (
    mistake("cross_entropy", "softmax_max_not_subtracted",
            "your softmax does not subtract the maximum first: exp of a large score overflows to inf and inf/inf "
            "is NaN; softmax(x) = softmax(x - max(x)), so shift every row by its maximum",
            lambda x, dim: _naive_softmax(x, dim)),
    mistake("cross_entropy", "softmax_global_max",
            "your softmax subtracts the maximum of the whole tensor instead of each row's own maximum "
            "(amax(dim, keepdim=True)): a row far below it underflows to 0/0", lambda x, dim: _naive_softmax(x - x.max(), dim)),
    mistake("cross_entropy", "softmax_last_dim", "your softmax ignores `dim` and always normalises over the last dimension",
            lambda x, dim: torch.softmax(x, -1) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "softmax_sum_last_dim",
            "your softmax subtracts the maximum along `dim` but sums along the last dimension: every reduction of "
            "softmax(x, dim) runs along dim, e / e.sum(dim=dim, keepdim=True)",
            lambda x, dim: _sum_over_last(torch.exp(x - x.amax(dim=dim, keepdim=True))) if _other_than_last(dim, x)
            else None),
    mistake("cross_entropy", "softmax_max_last_dim",
            "your softmax subtracts the maximum along the last dimension but sums along `dim`: the shift must be "
            "constant along dim, x.amax(dim=dim, keepdim=True), or it changes the result",
            lambda x, dim: _naive_softmax(x - x.amax(dim=-1, keepdim=True), dim) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "softmax_max_without_keepdim",
            "your softmax subtracts x.max(dim).values without keepdim=True, so the maxima broadcast along the "
            "wrong dimension", lambda x, dim: _naive_softmax(x - x.max(dim=dim).values, dim)),
)
LOG_SOFTMAX_MISTAKES = (
    mistake("cross_entropy", "log_of_softmax",
            "your log_softmax is log(softmax(x)): where the softmax underflows to 0 its log is -inf; compute "
            "x - max - log(sum(exp(x - max))) instead", lambda x, dim: torch.log(torch.softmax(x, dim))),
    mistake("cross_entropy", "log_softmax_max_not_subtracted",
            "your log_softmax computes x - log(sum(exp(x))) without subtracting the maximum first: exp overflows "
            "to inf", lambda x, dim: x - torch.log(torch.exp(x).sum(dim=dim, keepdim=True))),
    mistake("cross_entropy", "log_softmax_off_by_max",
            "your log_softmax is off by the maximum: x - log(sum(exp(x - max))) needs the max subtracted from x "
            "too (x - max - log(sum(exp(x - max))))",
            lambda x, dim: torch.log_softmax(x, dim) + x.amax(dim=dim, keepdim=True)),
    mistake("cross_entropy", "log_softmax_last_dim",
            "your log_softmax ignores `dim` and always normalises over the last dimension",
            lambda x, dim: torch.log_softmax(x, -1) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "log_softmax_negated",
            "your log_softmax has the wrong sign, log(sum(exp(x - max))) - (x - max): it is x - max - "
            "log(sum(exp(x - max))), never positive", lambda x, dim: -torch.log_softmax(x, dim)),
    mistake("cross_entropy", "log_softmax_global_max",
            "your log_softmax subtracts the maximum of the whole tensor instead of each row's own maximum",
            lambda x, dim: (x - x.max()) - torch.log(torch.exp(x - x.max()).sum(dim=dim, keepdim=True))),
)


class _Targets(NamedTuple):
    """A cross-entropy case flattened: logits (N, V) in float64, targets (N,), the kept rows, log p, and
    log p[target] of the kept rows."""

    flat: Tensor
    t: Tensor
    keep: Tensor
    logp: Tensor
    picked: Tensor
    ignore_index: int
    raw: Tensor  # the logits as given, (..., V), float64


def _normalised_over_first_dim(c: _Targets) -> Tensor | None:
    if c.raw.dim() < 2:
        return None
    logp = torch.log_softmax(c.raw, 0).reshape(-1, c.raw.shape[-1])
    return -logp[c.keep].gather(1, c.t[c.keep].unsqueeze(1)).mean()


def _ignoring_minus_100(c: _Targets) -> Tensor | None:
    if c.ignore_index == -100:
        return None
    k = c.t != -100
    return -torch.log_softmax(c.flat, -1)[k].gather(1, c.t[k].unsqueeze(1)).mean()


CE_IGNORES_MINUS_100 = mistake("cross_entropy", "ignores_minus_100",
                               "your cross_entropy ignores -100 whatever ignore_index says: compare the targets "
                               "with the ignore_index argument", _ignoring_minus_100)
CROSS_ENTROPY_MISTAKES = (
    mistake("cross_entropy", "mean_counts_ignored",
            "your mean counts the ignored positions too: divide by the number of targets that are not "
            "ignore_index", lambda c: -c.picked.sum() / c.t.numel()),
    CE_IGNORES_MINUS_100,
    mistake("cross_entropy", "sum_not_mean", "you returned the sum of -log p[target], not the mean over the kept positions",
            lambda c: -c.picked.sum()),
    mistake("cross_entropy", "no_minus_sign",
            "your loss has the wrong sign, the mean of +log p[target] (a minus forgotten, or a log_softmax whose sign is "
            "flipped): cross-entropy is the mean of -log p[target]", lambda c: c.picked.mean()),
    mistake("cross_entropy", "probability_not_log",
            "you averaged -p[target] (the probability) instead of -log p[target]", lambda c: -c.picked.exp().mean()),
    mistake("cross_entropy", "every_class_averaged",
            "you averaged the log-probabilities of every class, not only the target's", lambda c: -c.logp[c.keep].mean()),
    mistake("cross_entropy", "indexed_every_target",
            "you indexed logp[:, targets], which takes every row's log-probabilities at every target (an N x N "
            "matrix): pick one entry per row (gather, or logp[arange(N), targets])",
            lambda c: -c.logp[c.keep][:, c.t[c.keep]].mean()),
    mistake("cross_entropy", "log_softmax_over_first_dim",
            "your log-probabilities are normalised over the first dimension (dim=0, across the positions) instead "
            "of over the classes (dim=-1)", _normalised_over_first_dim),
    mistake("cross_entropy", "logits_as_log_probabilities",
            "your cross_entropy uses the logits themselves as log-probabilities (no log_softmax)",
            lambda c: -c.flat[c.keep].gather(1, c.t[c.keep].unsqueeze(1)).mean()),
)
MAX_SUBTRACTED_IN_PLACE = mistake("cross_entropy", "max_subtracted_in_place",
                                  "your code subtracted the maximum from the caller's tensor in place (x -= ...): "
                                  "compute a new tensor instead", lambda x, dim: x - x.amax(dim=dim, keepdim=True))


# Families: a dim written into the code, whatever `dim` says (the last one is softmax_last_dim's).
SOFTMAX_FIXED_DIM = mistake("cross_entropy", "softmax_fixed_dim",
                            "your softmax always normalises over dim={dim}, whatever `dim` says: normalise over the "
                            "dim given", dict())
LOG_SOFTMAX_FIXED_DIM = mistake("cross_entropy", "log_softmax_fixed_dim",
                                "your log_softmax always normalises over dim={dim}, whatever `dim` says: normalise "
                                "over the dim given", dict())
FIXED_DIMS = (0, 1, -2)


def _fixed_dims(entry: Mistake, x: Tensor, fn: Callable[[Tensor, int], Tensor]) -> Mistakes:
    """Each fixed dim that x has (one that is x's last dim too is weighed: it rules out what it does not match)."""
    return {entry.text(dim=k): (lambda k=k: fn(x.double(), k)) for k in FIXED_DIMS if -x.dim() <= k < x.dim()}


# Families: the sum (the normaliser) taken over the whole tensor or without keepdim, whichever maximum is
# subtracted first (each shift its own member: right, none, the whole tensor's, one without keepdim).
SOFTMAX_GLOBAL_SUM = mistake("cross_entropy", "softmax_global_sum",
                             "your softmax divides by e.sum(), the sum of the whole tensor, with e = exp({shift}): "
                             "each row is divided by its own total, e.sum(dim=dim, keepdim=True)", dict())
SOFTMAX_SUM_WITHOUT_KEEPDIM = mistake("cross_entropy", "softmax_sum_without_keepdim",
                                      "your softmax divides by e.sum(dim) without keepdim=True, with e = exp({shift}), "
                                      "so the totals broadcast along the wrong dimension: e.sum(dim=dim, keepdim=True)",
                                      dict())
LOG_SOFTMAX_GLOBAL_SUM = mistake("cross_entropy", "log_softmax_global_sum",
                                 "your log_softmax subtracts log(e.sum()), the sum of the whole tensor, with e = "
                                 "exp({shift}): each row subtracts the log of its own total, "
                                 "sum(dim=dim, keepdim=True)", dict())
LOG_SOFTMAX_SUM_WITHOUT_KEEPDIM = mistake("cross_entropy", "log_softmax_sum_without_keepdim",
                                          "your log_softmax subtracts log(e.sum(dim)) (or logsumexp(dim)) without "
                                          "keepdim=True, with e = exp({shift}), so the totals broadcast along the "
                                          "wrong dimension: sum(dim=dim, keepdim=True)", dict())
LOG_SOFTMAX_MAX_WITHOUT_KEEPDIM = mistake("cross_entropy", "log_softmax_max_without_keepdim",
                                          "your log_softmax subtracts x.max(dim).values without keepdim=True, so the "
                                          "maxima broadcast along the wrong dimension: x.amax(dim=dim, keepdim=True)",
                                          lambda x, dim: _log_softmax_as(x, dim, "no_keepdim", "keepdim"))
SHIFTS_WRITTEN = {"keepdim": "x - x.amax(dim=dim, keepdim=True)", "none": "x", "global": "x - x.max()",
                  "no_keepdim": "x - x.max(dim).values"}


def _reduced(t: Tensor, dim: int, how: str, op: str) -> Tensor | float:
    """t reduced by `op` ("amax" or "sum") along dim with keepdim (`keepdim`), over the whole tensor (`global`),
    along dim without keepdim (`no_keepdim`), or not at all (`none`: 0)."""
    if how == "none":
        return 0.0
    return getattr(t, op)() if how == "global" else getattr(t, op)(dim=dim, keepdim=how == "keepdim")


def _softmax_as(x: Tensor, dim: int, shift: str, total: str) -> Tensor:
    e = torch.exp(x - _reduced(x, dim, shift, "amax"))
    return e / _reduced(e, dim, total, "sum")


def _log_softmax_as(x: Tensor, dim: int, shift: str, total: str) -> Tensor:
    shifted = x - _reduced(x, dim, shift, "amax")
    return shifted - torch.log(_reduced(torch.exp(shifted), dim, total, "sum"))


def _normaliser_family(x: Tensor, dim: int, log: bool) -> Mistakes:
    entries = (LOG_SOFTMAX_GLOBAL_SUM, LOG_SOFTMAX_SUM_WITHOUT_KEEPDIM) if log else \
        (SOFTMAX_GLOBAL_SUM, SOFTMAX_SUM_WITHOUT_KEEPDIM)
    fn = _log_softmax_as if log else _softmax_as
    return {entry.text(shift=written): (lambda shift=shift, total=total: fn(x, dim, shift, total))
            for entry, total in zip(entries, ("global", "no_keepdim")) for shift, written in SHIFTS_WRITTEN.items()
            if not (log and shift == "global")}  # a constant shift cancels in x - shift - log(sum(exp(x - shift)))


def softmax_mistakes(x: Tensor, dim: int, got: Any = None) -> Mistakes:
    """For softmax(x, dim) (which gave `got`); also a fixed dim of FIXED_DIMS, and a sum over the whole tensor or
    without keepdim."""
    family = {**_fixed_dims(SOFTMAX_FIXED_DIM, x, torch.softmax), **_normaliser_family(x, dim, log=False)}
    return besides(bind(SOFTMAX_MISTAKES, x, dim), family, got)


def log_softmax_mistakes(x: Tensor, dim: int, got: Any = None) -> Mistakes:
    """For log_softmax(x, dim) (which gave `got`); also a fixed dim of FIXED_DIMS, and a sum over the whole
    tensor or without keepdim."""
    family = {**_fixed_dims(LOG_SOFTMAX_FIXED_DIM, x, torch.log_softmax), **_normaliser_family(x, dim, log=True)}
    return besides(bind([*LOG_SOFTMAX_MISTAKES, LOG_SOFTMAX_MAX_WITHOUT_KEEPDIM], x, dim), family, got)


# A family: the sum of -log p[target] divided by another count than the kept targets' (all the targets, 1 and
# the kept targets are named entries).
CE_DENOMINATOR = mistake("cross_entropy", "denominator",
                         "your loss divides the sum of -log p[target] by {count}: it is the mean over the kept "
                         "targets, divided by (targets != ignore_index).sum()", dict())


def _denominators(c: _Targets) -> dict[str, int]:
    kept, v = int(c.keep.sum()), c.raw.shape[-1]
    counts = {"logits.size(-1)": v, "keep.sum() * logits.size(-1)": kept * v}
    if c.raw.dim() > 1:
        counts["logits.size(0)"] = c.raw.shape[0]
    if c.raw.dim() > 2:
        counts["logits.size(1)"] = c.raw.shape[1]
    return {text: n for text, n in counts.items() if n not in (kept, c.t.numel(), 1)}


def cross_entropy_mistakes(logits: Tensor, targets: Tensor, ignore_index: int) -> Mistakes:
    """For cross_entropy(logits, targets, ignore_index=...); also the sum divided by another count."""
    v = logits.shape[-1]
    flat, t = logits.double().reshape(-1, v), targets.reshape(-1)
    keep = t != ignore_index
    logp = torch.log_softmax(flat, -1)
    picked = logp[keep].gather(1, t[keep].unsqueeze(1)).squeeze(1)
    c = _Targets(flat, t, keep, logp, picked, ignore_index, logits.double())
    family = {CE_DENOMINATOR.text(count=text): (lambda n=n: -picked.sum() / n) for text, n in _denominators(c).items()}
    return besides(bind(CROSS_ENTROPY_MISTAKES, c), family)


CE_PYTHON_NUMBER = mistake(
    "cross_entropy", "python_number",
    "your cross_entropy returns a Python number holding the right loss (.item(), float(...) or math.log): return "
    "the 0-dim tensor itself, which the backward pass runs through",
    lambda got, want: got if isinstance(got, (float, int)) and not isinstance(got, bool)
    and abs(got - float(want)) <= 1e-4 * max(1.0, abs(float(want))) else None)


CE_DEFAULT_IGNORE_INDEX = recognised(
    "cross_entropy", "default_ignore_index",
    "your ignore_index defaults to another value than -100 (given as ignore_index=-100, your cross_entropy is "
    "right): the contract's default is PyTorch's, ignore_index=-100")
CE_GATHERED_IGNORED = recognised(
    "cross_entropy", "gathered_ignored",
    "your cross_entropy indexes log p with the ignored targets themselves (an ignore_index such as -100 is no "
    "class, so gather or indexing fails on it): drop the positions whose target is ignore_index first, then "
    "gather, logp[keep].gather(1, targets[keep].unsqueeze(1))")


def python_number_mistakes(got: Any, want: Tensor) -> Mistakes:
    """For what cross_entropy returned instead of a 0-dim tensor, the right loss being `want`."""
    return bind([CE_PYTHON_NUMBER], got, want)


def subtracted_in_place_mistakes(x: Tensor, dim: int = -1) -> Mistakes:
    return bind([MAX_SUBTRACTED_IN_PLACE], x, dim)


# --- optimizer ---------------------------------------------------------------------------------------

STEP_FROM_ZERO = recognised("optimizer", "step_from_zero",
                            "your step counts the steps from 0 at the first update, so the bias correction 1 - b1**t "
                            "is 0 and divides by zero: count the update first (t = 1 at a parameter's first update)")
ADAMW_MISTAKES = variants("optimizer", {
    "your bias correction uses one step counter for all the parameters: t counts each parameter's own "
    "updates (a parameter without a gradient is not updated, and its t does not move)": "global_step",
    "your weight decay goes into the gradient (Adam with L2, g + wd * p): AdamW decays the parameter "
    "itself, p *= 1 - lr * wd, outside m and v": "l2",
    "you decay the parameter after the Adam update instead of before it: p *= 1 - lr * wd comes first":
        "decay_after",
    "your decay is p *= 1 - wd, without the learning rate: AdamW's is p *= 1 - lr * wd": "decay_without_lr",
    "your eps is inside the square root (sqrt(v_hat + eps)); AdamW adds it after: sqrt(v_hat) + eps":
        "eps_inside",
    "your first moment m uses beta2: m = b1 * m + (1 - b1) * g, only v uses b2": "b2_for_m",
    "your first moment adds the whole gradient, m = b1 * m + g: it is a running average, "
    "m = b1 * m + (1 - b1) * g": "m_without_1_minus_b1",
    "your second moment adds the whole squared gradient, v = b2 * v + g**2: it is a running average, "
    "v = b2 * v + (1 - b2) * g**2": "v_without_1_minus_b2",
    "your betas are swapped (m uses beta2, v beta1): m = b1 * m + (1 - b1) * g, v = b2 * v + (1 - b2) * g**2":
        "betas_swapped",
    "your v averages g, not g**2 (v = b2 * v + (1 - b2) * g * g), so its square root is NaN where v < 0":
        "v_of_g",
    "your update has no bias correction: divide m by 1 - b1**t and v by 1 - b2**t": "no_bias_correction",
    "your v is divided by 1 - b2**t after its square root: the square root is of v / (1 - b2**t)":
        "v_correction_outside_sqrt",
    "your optimizer reads lr once, at construction: read group['lr'] at every step, a schedule changes it":
        "lr_once",
    "you decay every parameter at every step, also those without a gradient: skip them entirely":
        "decay_without_grad",
    "your state (m, v and the step count) starts afresh at every step: create it only on a parameter's "
    "first update and keep it in self.state[p]": "no_state",
    "your update uses the gradient instead of m (no first moment)": "no_momentum",
    "your m and v are one tensor (state['m'] = state['v'] = torch.zeros_like(p) gives one tensor two names), so "
    "each in-place update of one changes the other: create each with its own torch.zeros_like(p)":
        "moments_aliased",
})


CLOSURE_NOT_CALLED = mistake("optimizer", "closure_not_called",
                             "your step never calls the closure: it computes this step's gradients "
                             "(and the loss to return), so call it first", lambda: 0)


def closure_mistakes() -> Mistakes:
    """For how many times step(closure) ran the closure."""
    return bind([CLOSURE_NOT_CALLED])


def adamw_run(values: list[Tensor], grads: list[list[Tensor | None]], groups: list[dict], lrs: list[list[float]],
              variant: str = "", bias_steps: tuple[int, int] = (0, 0),
              corrections: tuple[str, str] = ("b1", "b2"), swapped: tuple[bool, bool] = (False, False)
              ) -> list[list[Tensor]]:
    """Every step's parameters (float64) of the contract's AdamW, with the mistake `variant` switched on, or
    the bias corrections 1 - c1**(t + k1), 1 - c2**(t + k2) of `bias_steps` (k1, k2) and `corrections` (c1, c2:
    "b1", "b2", or "none", no correction), or with the weights of m's and/or v's average swapped (`swapped`:
    m = (1 - b1) * m + b1 * g).

    `groups[i]` holds parameter i's settings (lr, betas, eps, weight_decay) at construction; `lrs[s][i]` is
    its lr at step s; `grads[s][i]` its gradient at step s, or None.
    """
    p = [v.double().clone() for v in values]
    m = [torch.zeros_like(x) for x in p]
    v = [torch.zeros_like(x) for x in p]
    own = [0] * len(p)
    history = []
    for step, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            settings = groups[i]
            lr = settings["lr"] if variant == "lr_once" else lrs[step - 1][i]
            (b1, b2), eps, wd = settings["betas"], settings["eps"], settings["weight_decay"]
            if g is None:
                if variant == "decay_without_grad":
                    p[i] *= 1 - lr * wd
                continue
            g = g.double()
            own[i] += 1
            t = step if variant == "global_step" else own[i]
            if variant == "betas_swapped":
                b1, b2 = b2, b1
            m_beta = b2 if variant == "b2_for_m" else b1
            if variant == "l2":
                g = g + wd * p[i]
            elif variant == "decay_without_lr":
                p[i] *= 1 - wd
            elif variant != "decay_after":
                p[i] *= 1 - lr * wd
            if variant == "no_state":
                m[i], v[i], t = torch.zeros_like(p[i]), torch.zeros_like(p[i]), 1
            m_keep, m_new = m_beta, (1.0 if variant == "m_without_1_minus_b1" else 1 - m_beta)
            v_keep, v_new = b2, (1.0 if variant == "v_without_1_minus_b2" else 1 - b2)
            if swapped[0]:
                m_keep, m_new = m_new, m_keep
            if swapped[1]:
                v_keep, v_new = v_new, v_keep
            m[i] = m_keep * m[i] + m_new * g
            if variant == "moments_aliased":  # one tensor: updated in place as m, then again as v
                m[i] = v[i] = v_keep * m[i] + v_new * g * g
            else:
                v[i] = v_keep * v[i] + v_new * (g if variant == "v_of_g" else g * g)
            betas = {"b1": b1, "b2": b2, "none": 0.0}
            c1, c2 = (1.0, 1.0) if variant == "no_bias_correction" else (
                1 - betas[corrections[0]]**(t + bias_steps[0]), 1 - betas[corrections[1]]**(t + bias_steps[1]))
            num = g if variant == "no_momentum" else m[i] / c1
            if variant == "eps_inside":
                denom = (v[i] / c2 + eps).sqrt()
            elif variant == "v_correction_outside_sqrt":
                denom = v[i].sqrt() / c2 + eps
            else:
                denom = (v[i] / c2).sqrt() + eps
            p[i] = p[i] - lr * num / denom
            if variant == "decay_after":
                p[i] *= 1 - lr * wd
        history.append([x.clone() for x in p])
    return history


# A family: the step of either bias correction shifted (t - 1, t + 1), each pair its own sentence.
BIAS_STEPS = mistake(
    "optimizer", "bias_steps",
    "your bias corrections are 1 - b1**({t1}) and 1 - b2**({t2}): both use t, the parameter's own update "
    "count, which is 1 at its first update (state['step'] += 1 before it is used)", dict())
BIAS_SHIFTS = [(k1, k2) for k1 in (-1, 0, 1) for k2 in (-1, 0, 1) if (k1, k2) != (0, 0)]
# A family: either correction with the other beta, or none (both none is no_bias_correction).
BIAS_BETAS = mistake(
    "optimizer", "bias_betas",
    "your bias corrections are {c1} for m and {c2} for v: m is divided by 1 - b1**t and v by 1 - b2**t, "
    "each moment by its own beta", dict())
BIAS_BETA_PAIRS = [(c1, c2) for c1 in ("b1", "b2", "none") for c2 in ("b1", "b2", "none")
                   if (c1, c2) not in (("b1", "b2"), ("none", "none"))]


# A family: the weights of a moment's running average swapped, (1 - b) * m + b * g, in m, v or both.
MOMENT_WEIGHTS_SWAPPED = mistake(
    "optimizer", "moment_weights_swapped",
    "your moment update ({moments}) swaps the weights of its running average, {wrong}: the old value keeps the beta, "
    "m = b1 * m + (1 - b1) * g and v = b2 * v + (1 - b2) * g**2", dict())
MOMENT_SWAPS = {
    (True, False): ("m", "m = (1 - b1) * m + b1 * g"),
    (False, True): ("v", "v = (1 - b2) * v + b2 * g**2"),
    (True, True): ("m, v", "m = (1 - b1) * m + b1 * g, v = (1 - b2) * v + b2 * g**2"),
}


def _correction(beta: str) -> str:
    return "1" if beta == "none" else f"1 - {beta}**t"


def _adamw_mistakes(values, grads, groups, lrs, pick: Callable[[list[list[Tensor]]], Any], got: Any) -> Mistakes:
    """ADAMW_MISTAKES and the BIAS_SHIFTS family, each model `pick(run)` of the run it gives (which came back
    as `got`); each run computed once, when a check fails."""
    cache: dict[Any, Any] = {}

    def model(variant="", bias_steps=(0, 0), corrections=("b1", "b2"), swapped=(False, False)):
        key = variant, bias_steps, corrections, swapped
        if key not in cache:
            cache[key] = pick(adamw_run(values, grads, groups, lrs, variant, bias_steps, corrections, swapped))
        return cache[key]

    family = {BIAS_STEPS.text(t1=_plus("t", k1), t2=_plus("t", k2)): (lambda k=(k1, k2): model(bias_steps=k))
              for k1, k2 in BIAS_SHIFTS}
    family.update({BIAS_BETAS.text(c1=_correction(c1), c2=_correction(c2)): (lambda c=(c1, c2): model(corrections=c))
                   for c1, c2 in BIAS_BETA_PAIRS})
    family.update({MOMENT_WEIGHTS_SWAPPED.text(moments=moments, wrong=wrong): (lambda w=w: model(swapped=w))
                   for w, (moments, wrong) in MOMENT_SWAPS.items()})
    return besides(simulated(ADAMW_MISTAKES, model), family, got)


def adamw_run_mistakes(values, grads, groups, lrs, got: Any = None) -> Mistakes:
    """For a whole run, which came back as `got`: every step's parameters, flattened in order (see
    `flat_run`). One step alone may not tell two mistakes apart (with betas (0.9, 0.99) an m without
    (1 - b1) and a v without its bias correction both scale the first step by 10); the run does."""
    return _adamw_mistakes(values, grads, groups, lrs, flat_run, got)


def flat_run(steps: list[list[Any]]) -> Tensor | None:
    """Every step's parameters in one float64 vector; None where a step holds something else than tensors."""
    if not all(isinstance(t, Tensor) and t.is_floating_point() for step in steps for t in step):
        return None
    return torch.cat([t.detach().double().flatten() for step in steps for t in step])


def adamw_mistakes(values, grads, groups, lrs, step: int, index: int, got: Any = None) -> Mistakes:
    """For parameter `index` after step `step` (from 0), which came back as `got`."""
    return _adamw_mistakes(values, grads, groups, lrs, lambda run: run[step][index], got)


def _norm(grads: list[Tensor]) -> Tensor:
    return torch.stack([g.double().norm() for g in grads]).norm()


CLIP_NORM_MISTAKES = (
    mistake("optimizer", "norm_after_clipping",
            "you returned the norm after clipping: return the total norm the gradients had before",
            lambda grads, max_norm, norm: torch.clamp(norm, max=max_norm)),
    mistake("optimizer", "squared_norm", "you returned the squared norm (the sum of squares, without its square root)",
            lambda grads, max_norm, norm: norm**2),
    mistake("optimizer", "sum_of_norms",
            "you returned the sum of the per-parameter norms, not the norm of all the gradients together "
            "(sqrt of the sum of every squared entry)", lambda grads, max_norm, norm: sum(g.double().norm() for g in grads)),
    mistake("optimizer", "last_norm_only",
            "you returned the last parameter's norm only: the norm is over all the gradients together",
            lambda grads, max_norm, norm: grads[-1].double().norm()),
    mistake("optimizer", "largest_norm",
            "you returned the largest of the per-parameter norms (an infinity norm over them): the norm is the L2 "
            "norm of all the gradients together, the square root of the sum of every squared entry",
            lambda grads, max_norm, norm: torch.stack([g.double().norm() for g in grads]).max()),
    mistake("optimizer", "mean_of_norms",
            "you returned the mean of the per-parameter norms: the norm is the L2 norm of all the gradients "
            "together, the square root of the sum of every squared entry",
            lambda grads, max_norm, norm: torch.stack([g.double().norm() for g in grads]).mean()),
)
CLIP_GRADS_MISTAKES = (
    mistake("optimizer", "gradients_unchanged",
            "the gradients were not changed: clip_grad_norm scales every .grad in place (and a generator of "
            "parameters can be read only once: make a list first)",
            lambda g, max_norm, norm: g if norm > max_norm else None),
    mistake("optimizer", "clipped_one_by_one",
            "you clipped each gradient by its own norm: the norm is one, of all the gradients together",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / (g.norm() + 1e-6), max=1.0)),
    mistake("optimizer", "always_scaled",
            "you always scale by max_norm / norm, also when the norm is already below max_norm: the factor is "
            "min(1, max_norm / (norm + 1e-6))", lambda g, max_norm, norm: g * max_norm / (norm + 1e-6)),
    mistake("optimizer", "factor_without_1e-6",
            "your factor is max_norm / norm without the + 1e-6 (torch adds it to the norm)",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / norm, max=1.0)),
    mistake("optimizer", "factor_inverted", "your factor is norm / max_norm, the wrong way round",
            lambda g, max_norm, norm: g * torch.clamp(norm / max_norm, max=1.0)),
    mistake("optimizer", "factor_of_squared_norm", "your factor uses the squared norm (no square root)",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / (norm**2 + 1e-6), max=1.0)),
)


# A family of both clip checks: the total norm of another order than 2 (the sum of absolute values, the
# largest absolute value), returned and used for the factor alike.
CLIP_NORM_ORDER = mistake(
    "optimizer", "norm_order",
    "your total norm is of order {ord} (torch.linalg.vector_norm(..., ord={ord}) over every entry): "
    "clip_grad_norm's is the L2 norm, the square root of the sum of every squared entry",
    lambda grads, max_norm, index, order: _ordered_clip(grads, max_norm, index, order))
CLIP_NORM_ORDERS = (1, "inf")


def _ordered_clip(grads: list[Tensor], max_norm: float, index: int | None, order: Any) -> Tensor:
    """The norm of that order (index None), or gradient `index` clipped by it."""
    flat = torch.cat([g.double().flatten() for g in grads])
    norm = torch.linalg.vector_norm(flat, ord=math.inf if order == "inf" else order)
    if index is None:
        return norm
    return grads[index].double() * torch.clamp(max_norm / (norm + 1e-6), max=1.0)


def _norm_orders(grads: list[Tensor], max_norm: float, index: int | None) -> Mistakes:
    return {CLIP_NORM_ORDER.text(ord=order): CLIP_NORM_ORDER.on(grads, max_norm, index, order)
            for order in CLIP_NORM_ORDERS}


def clip_norm_mistakes(grads: list[Tensor], max_norm: float) -> Mistakes:
    """For the norm clip_grad_norm returns; also the CLIP_NORM_ORDER family."""
    return besides(bind(CLIP_NORM_MISTAKES, grads, max_norm, _norm(grads)), _norm_orders(grads, max_norm, None))


def clip_grads_mistakes(grads: list[Tensor], max_norm: float, index: int) -> Mistakes:
    """For gradient `index` after clip_grad_norm(parameters, max_norm); also the CLIP_NORM_ORDER family."""
    return besides(bind(CLIP_GRADS_MISTAKES, grads[index].double(), max_norm, _norm(grads)),
                   _norm_orders(grads, max_norm, index))


# --- lr_schedule -------------------------------------------------------------------------------------

def schedule(steps: list[int], max_lr: float, min_lr: float, warmup: int, total: int, variant: str = "", *,
             warmup_offsets: tuple[int, int] = (0, 0), progress_offsets: tuple[int, int] = (0, 0),
             cosine: tuple[str, str] = ("min_lr", "max_lr - min_lr"),
             rounding: Callable[[float], float] | None = None, factor: float | None = None) -> Tensor:
    """lr at each step (float64), with the mistake `variant` switched on, or the warmup's fraction
    (step + a) / (warmup_steps + b) and the cosine's progress (step - warmup_steps + a) / (total_steps -
    warmup_steps + b) off by the offsets (a, b) given, or the cosine base + 0.5 * amplitude * (1 + cos) of
    `cosine` (base, amplitude: "min_lr" or "0", "max_lr - min_lr", "max_lr" or "max_lr + min_lr"), or the progress rounded to a
    whole number by `rounding`, or the cosine's angle `factor` * progress instead of pi * progress."""
    out = []
    (wa, wb), (pa, pb) = warmup_offsets, progress_offsets
    for s in steps:
        if s < warmup:
            lr = {"plus_one": max_lr * (s + 1) / warmup, "nanogpt": max_lr * (s + 1) / (warmup + 1),
                  "to_one": s / warmup, "int_division": max_lr * (s // warmup),
                  "warmup_from_min_lr": min_lr + (max_lr - min_lr) * s / warmup,
                  "warmup_to_min_lr": min_lr * s / warmup, "warmup_over_total": max_lr * s / total}.get(
                      variant, max_lr * (s + wa) / (warmup + wb))
        elif s > total and variant != "cosine_continues":
            lr = 0.0 if variant == "zero_after" else max_lr if variant == "max_after" else min_lr
        else:
            progress = (s - warmup + pa) / (total - warmup + pb)
            if variant == "progress_from_0":
                progress = s / total
            elif variant == "over_total":
                progress = (s - warmup) / total
            elif variant == "step_over_decay":
                progress = s / (total - warmup)
            if rounding is not None:
                progress = rounding(progress)
            angle = progress if variant == "no_pi" else math.pi * progress
            if factor is not None:
                angle = factor * progress
            top, bottom = (min_lr, max_lr) if variant == "swapped" else (max_lr, min_lr)
            if variant == "no_floor":
                lr = 0.5 * max_lr * (1 + math.cos(angle))
            elif variant == "no_half":
                lr = min_lr + (max_lr - min_lr) * (1 + math.cos(angle))
            elif variant == "linear":
                lr = max_lr - (max_lr - min_lr) * progress
            elif variant == "no_one":
                lr = min_lr + 0.5 * (max_lr - min_lr) * math.cos(angle)
            else:
                base = {"min_lr": bottom, "0": 0.0, "max": 0.0}[cosine[0]]
                amplitude = {"max_lr - min_lr": top - bottom, "max_lr": top, "max_lr + min_lr": top + bottom}[cosine[1]]
                lr = base + 0.5 * amplitude * (1 + math.cos(angle))
                if cosine[0] == "max":  # clamped from below instead of shifted
                    lr = max(lr, min_lr)
        out.append(lr)
    return torch.tensor(out, dtype=torch.float64)


SCHEDULE_MISTAKES = variants("lr_schedule", {
    "your warmup is one step ahead: max_lr * (step + 1) / warmup_steps; the contract's starts at 0 "
    "(max_lr * step / warmup_steps)": "plus_one",
    "your warmup is nanoGPT's max_lr * (step + 1) / (warmup_steps + 1); the contract's is "
    "max_lr * step / warmup_steps": "nanogpt",
    "your warmup climbs to 1, not to max_lr: multiply step / warmup_steps by max_lr": "to_one",
    "your warmup uses integer division (step // warmup_steps), which is 0 until the warmup ends": "int_division",
    "your cosine decays to 0, not to min_lr: min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(...))": "no_floor",
    "your cosine counts its progress from step 0: it starts after the warmup, "
    "(step - warmup_steps) / (total_steps - warmup_steps)": "progress_from_0",
    "your cosine's progress divides by total_steps instead of total_steps - warmup_steps, so it never "
    "reaches min_lr": "over_total",
    "your cosine's progress is step / (total_steps - warmup_steps), counted from step 0 (it reaches 1 before "
    "total_steps): it starts after the warmup, (step - warmup_steps) / (total_steps - warmup_steps)":
        "step_over_decay",
    "your cosine lacks the factor 0.5: 0.5 * (1 + cos) runs from 1 to 0": "no_half",
    "your cosine lacks the 1 +: 0.5 * (1 + cos(pi * progress)) runs from 1 to 0, where 0.5 * cos runs from "
    "0.5 to -0.5": "no_one",
    "your cosine's angle is the progress itself, not pi times it": "no_pi",
    "your cosine runs from min_lr up to max_lr instead of down (max_lr and min_lr swapped, or 1 - cos where "
    "1 + cos belongs)": "swapped",
    "your decay is linear: the contract's is a cosine, 0.5 * (1 + cos(pi * progress))": "linear",
    "after total_steps your schedule returns 0: it stays at min_lr": "zero_after",
    "after total_steps your schedule goes back to max_lr: it stays at min_lr": "max_after",
    "your schedule has no floor after total_steps: the cosine goes on and rises again; every step > total_steps "
    "gives min_lr": "cosine_continues",
    "your warmup starts at min_lr: it climbs from 0, max_lr * step / warmup_steps": "warmup_from_min_lr",
    "your warmup climbs to min_lr: it climbs to max_lr, max_lr * step / warmup_steps": "warmup_to_min_lr",
    "your warmup divides by total_steps, max_lr * step / total_steps, so it ends far below max_lr: it climbs "
    "over the warmup only, max_lr * step / warmup_steps": "warmup_over_total",
})


LR_AS_TENSOR = mistake("lr_schedule", "lr_as_tensor",
                       "your lr_at returns a tensor holding the right value (torch.cos, torch.tensor): the "
                       "schedule is a plain float, computed with math.cos", lambda right: torch.tensor(right))


def tensor_lr_mistakes(right: float) -> Mistakes:
    """For what lr_at returned instead of a float, the right value being `right`."""
    return bind([LR_AS_TENSOR], right)


# Families: the warmup's fraction and the cosine's progress each off by one in numerator and/or denominator.
WARMUP_OFF_BY_ONE = mistake(
    "lr_schedule", "warmup_offsets",
    "your warmup is max_lr * ({numerator}) / ({denominator}): the contract's is max_lr * step / warmup_steps, "
    "0 at step 0 and max_lr at step warmup_steps",
    lambda steps, max_lr, min_lr, warmup, total, offsets: schedule(steps, max_lr, min_lr, warmup, total,
                                                                   warmup_offsets=offsets))
PROGRESS_OFF_BY_ONE = mistake(
    "lr_schedule", "progress_offsets",
    "your cosine's progress is ({numerator}) / ({denominator}): the contract's is (step - warmup_steps) / "
    "(total_steps - warmup_steps), 0 at the end of the warmup and 1 at total_steps",
    lambda steps, max_lr, min_lr, warmup, total, offsets: schedule(steps, max_lr, min_lr, warmup, total,
                                                                   progress_offsets=offsets))
OFFSETS = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a, b) != (0, 0)]
# A family: the cosine's progress rounded to a whole number (integer division, round, ceil), 0 or 1, so the lr
# jumps between max_lr and min_lr instead of decaying.
PROGRESS_ROUNDED = mistake(
    "lr_schedule", "progress_rounded",
    "your cosine's progress is a whole number, {expr} (0 or 1), so the lr jumps between max_lr and min_lr instead "
    "of decaying: the progress is the true quotient, (step - warmup_steps) / (total_steps - warmup_steps), a float "
    "that runs from 0 to 1", lambda steps, max_lr, min_lr, warmup, total, rounding: schedule(
        steps, max_lr, min_lr, warmup, total, rounding=rounding))
PROGRESS_ROUNDINGS: dict[str, Callable[[float], float]] = {
    "(step - warmup_steps) // (total_steps - warmup_steps)": math.floor,
    "round((step - warmup_steps) / (total_steps - warmup_steps))": round,
    "math.ceil((step - warmup_steps) / (total_steps - warmup_steps))": math.ceil}
# A family: the cosine's angle another multiple of the progress than pi (the progress itself is no_pi).
COSINE_ANGLE = mistake(
    "lr_schedule", "cosine_angle",
    "your cosine's angle is {angle}: it is pi * progress, half a period, so that the lr falls from max_lr at the "
    "end of the warmup to min_lr at total_steps and no further",
    lambda steps, max_lr, min_lr, warmup, total, factor: schedule(steps, max_lr, min_lr, warmup, total,
                                                                  factor=factor))
COSINE_ANGLES = {"2 * pi * progress": 2 * math.pi, "pi / 2 * progress": math.pi / 2}
# A family: the cosine piece's base or amplitude without min_lr (both without it is no_floor).
COSINE_FORM = mistake(
    "lr_schedule", "cosine_form",
    "your cosine is {lr}: it runs from max_lr at the end of the warmup down to min_lr at total_steps, "
    "min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))",
    lambda steps, max_lr, min_lr, warmup, total, form: schedule(steps, max_lr, min_lr, warmup, total, cosine=form))
COSINE_FORMS = {("0", "max_lr - min_lr"): "0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))",
                ("min_lr", "max_lr"): "min_lr + 0.5 * max_lr * (1 + cos(pi * progress))",
                ("max", "max_lr"): "max(min_lr, 0.5 * max_lr * (1 + cos(pi * progress)))",
                ("max", "max_lr - min_lr"): "max(min_lr, 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress)))",
                ("min_lr", "max_lr + min_lr"): "min_lr + 0.5 * (max_lr + min_lr) * (1 + cos(pi * progress))",
                ("0", "max_lr + min_lr"): "0.5 * (max_lr + min_lr) * (1 + cos(pi * progress))"}


def _plus(term: str, offset: int) -> str:
    return term + (f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else "")


def schedule_mistakes(steps: list[int], max_lr: float, min_lr: float, warmup: int, total: int,
                      got: Any = None) -> Mistakes:
    """For lr_at at `steps` (which gave `got`); also the warmup and the progress off by one (OFFSETS), the
    cosine's form (COSINE_FORMS) and its progress rounded (PROGRESS_ROUNDINGS)."""
    config = (steps, max_lr, min_lr, warmup, total)
    family = {text: entry.on(*config, offsets) for text, entry, offsets in _schedule_texts()}
    return besides(simulated(SCHEDULE_MISTAKES, lambda variant: schedule(*config, variant)), family, got)


@functools.cache
def _schedule_texts() -> tuple[tuple[str, Mistake, Any], ...]:
    warmup = [(WARMUP_OFF_BY_ONE.text(numerator=_plus("step", a), denominator=_plus("warmup_steps", b)),
               WARMUP_OFF_BY_ONE, (a, b)) for a, b in OFFSETS if (a, b) not in ((1, 0), (1, 1))]  # plus_one, nanogpt
    progress = [(PROGRESS_OFF_BY_ONE.text(numerator=_plus("step - warmup_steps", a),
                                          denominator=_plus("total_steps - warmup_steps", b)), PROGRESS_OFF_BY_ONE,
                 (a, b)) for a, b in OFFSETS]
    forms = [(COSINE_FORM.text(lr=written), COSINE_FORM, form) for form, written in COSINE_FORMS.items()]
    rounded = [(PROGRESS_ROUNDED.text(expr=expr), PROGRESS_ROUNDED, fn) for expr, fn in PROGRESS_ROUNDINGS.items()]
    angles = [(COSINE_ANGLE.text(angle=expr), COSINE_ANGLE, factor) for expr, factor in COSINE_ANGLES.items()]
    return tuple(warmup + progress + forms + rounded + angles)


# --- rope --------------------------------------------------------------------------------------------

def rope_tables(max_len: int, head_dim: int, base: float = 10000.0, *, variant: str = "",
                exponent_offsets: tuple[int, int] = (0, 0)) -> tuple[Tensor, Tensor]:
    """(cos, sin), each (max_len, head_dim / 2), in float64, with the mistake `variant` switched on, or the
    exponent (2i + a) / (head_dim + b) of `exponent_offsets` (a, b).

    `float16` computes the angles as that mistake does (float16 positions times float16 frequencies),
    and `no_minus` in float32: their angles are large, so the rounding of the mistake's own dtype decides.
    """
    features = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 2i
    a, b = exponent_offsets
    exponent = {"pair_index": features / 2, "off_by_one": features - 2, "exponent_doubled": 2 * features}.get(
        variant, features + a) / (head_dim + b)
    base = 10000.0 if variant == "base_ignored" else base
    freqs = base ** (exponent if variant == "no_minus" else -exponent)
    positions = torch.arange(max_len, dtype=torch.float64) + (1 if variant == "from_one" else 0)
    if variant == "float16":
        angles = torch.outer(torch.arange(max_len, dtype=torch.float16), freqs.float().half()).double()
    elif variant == "no_minus":
        angles = torch.outer(positions.float(), base ** (features.float() / head_dim)).double()
    else:
        angles = torch.outer(positions, freqs)
    cos, sin = angles.cos(), angles.sin()
    return (sin, cos) if variant == "swapped" else (cos, sin)


ROPE_TABLE_MISTAKES = variants("rope", {
    "your frequencies use the exponent i / head_dim, i being the pair index: it is 2i / head_dim "
    "(features 2i and 2i+1 share pair i's frequency), theta_i = base**(-2i / head_dim)": "pair_index",
    "your frequencies are base**(+2i / head_dim): the exponent is negative, so that pair 0 turns fastest "
    "(1 radian per position) and every later pair slower": "no_minus",
    "your exponent is off by one pair, base**(-2(i-1) / head_dim): pair 0's frequency is base**0 = 1": "off_by_one",
    "your positions start at 1 instead of 0: row p of the tables is position p, so row 0 is cos 1, sin 0":
        "from_one",
    "you returned (sin, cos): the contract's order is (cos, sin)": "swapped",
    "your angles are computed in float16, whose rounding of position * frequency reaches a radian at a few "
    "thousand positions: compute positions and frequencies in float32 (or float64)": "float16",
    "your frequencies ignore the base argument and always use 10000": "base_ignored",
    "your exponent is twice too large, base**(-4i / head_dim) (2i / (head_dim // 2), or the 2 of 2i counted "
    "twice): it is base**(-2i / head_dim), i counting the pairs from 0": "exponent_doubled",
})
ROPE_TABLE_SHAPE_MISTAKES = (
    mistake("rope", "tables_repeated_wide",
            "your tables are head_dim wide, each frequency repeated (as Hugging Face's cat((freqs, freqs)) is): "
            "this kit's tables hold one column per pair, head_dim // 2",
            lambda max_len, head_dim: torch.Size((max_len, head_dim))),
    mistake("rope", "tables_transposed", "your tables are transposed, (head_dim // 2, max_len): one row per position",
            lambda max_len, head_dim: torch.Size((head_dim // 2, max_len))),
)
ONE_COMPLEX_TABLE = mistake("rope", "one_complex_table",
                            "you returned one complex table (torch.polar, as Meta's precompute_freqs_cis does): return "
                            "its real and imaginary parts, cos and sin, as two float32 tables",
                            lambda result: result if isinstance(result, Tensor) and result.is_complex() else None)
FLOAT64_TABLE = mistake("rope", "float64_table",
                        "your table is float64 (math or float64 arithmetic left unconverted): return float32 tables, "
                        ".to(torch.float32)", lambda table: table.double() if table.dtype == torch.float64 else None)


# Families of both encodings: the exponent 2i / d off by a little in its numerator and/or denominator.
EXPONENT_OFFSETS = [(a, b) for a in (-2, -1, 0, 1, 2) for b in (-2, -1, 0, 1, 2) if (a, b) != (0, 0)]
ROPE_EXPONENT = mistake(
    "rope", "exponent_offsets",
    "your frequencies are base**(-{numerator} / {denominator}): they are base**(-2i / head_dim), i counting "
    "the pairs from 0, so pair 0 turns by 1 radian a position", dict())


@functools.cache
def _exponent_texts(entry: Mistake, d: str, skip: tuple[int, int]) -> dict[str, tuple[int, int]]:
    """{sentence: (a, b)} of the EXPONENT_OFFSETS but `skip` (a named entry's), formatted once."""
    def term(name: str, offset: int) -> str:
        return f"({_plus(name, offset)})" if offset else name
    return {entry.text(numerator=term("2i", a), denominator=term(d, b)): (a, b)
            for a, b in EXPONENT_OFFSETS if (a, b) != skip}


# A family: the exponent 2i / head_dim rounded down to a whole number (an integer division, or an int of the
# quotient), which collapses the frequencies: 0 for every pair (all 1, the angle is the position itself), or, with
# the minus inside the floor, -1 for every pair after the first.
ROPE_EXPONENT_FLOORED = mistake(
    "rope", "exponent_floored",
    "your exponent is {exponent}, an integer division (//, or an int() or .long() of the quotient) that rounds "
    "down to a whole number, so your frequencies collapse to {freqs}: the exponent is -2i / head_dim with true "
    "division (/) in floating point, a different frequency for each pair, base**(-2i / head_dim)", dict())
FLOORED_EXPONENTS = {("2i // head_dim", "[1, 1, 1, ...]"): lambda i, base: torch.ones_like(i),
                     ("-2i // head_dim", "[1, 1/base, 1/base, ...]"): lambda i, base: torch.where(i == 0, 1.0, 1 / base)}


def _floored_tables(max_len: int, head_dim: int, base: float, freqs: Callable[[Tensor, float], Tensor]
                    ) -> tuple[Tensor, Tensor]:
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64),
                         freqs(torch.arange(head_dim // 2, dtype=torch.float64), base))
    return angles.cos(), angles.sin()


def rope_table_mistakes(max_len: int, head_dim: int, base: float = 10000.0) -> Mistakes:
    """For the pair (cos, sin) of rope_angles; see them one at a time with `mapped`. Also the exponent off by
    EXPONENT_OFFSETS (off_by_one is (-2, 0)), and rounded down to a whole number (FLOORED_EXPONENTS)."""
    named = simulated(ROPE_TABLE_MISTAKES, lambda variant: rope_tables(max_len, head_dim, base, variant=variant))
    family = {text: (lambda k=k: rope_tables(max_len, head_dim, base, exponent_offsets=k))
              for text, k in _exponent_texts(ROPE_EXPONENT, "head_dim", (-2, 0)).items()}
    family.update({ROPE_EXPONENT_FLOORED.text(exponent=exponent, freqs=freqs):
                   (lambda f=f: _floored_tables(max_len, head_dim, base, f))
                   for (exponent, freqs), f in FLOORED_EXPONENTS.items()})
    return {**named, **family}


def rope_table_shape_mistakes(max_len: int, head_dim: int) -> Mistakes:
    return bind(ROPE_TABLE_SHAPE_MISTAKES, max_len, head_dim)


def rope_table_pair_mistakes(result: Any) -> Mistakes:
    """For what rope_angles returned when it is not a pair of tables."""
    return bind([ONE_COMPLEX_TABLE], result)


def rope_table_dtype_mistakes(table: Tensor) -> Mistakes:
    return bind([FLOAT64_TABLE], table)


def rope_rotated(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None, *, variant: str = "") -> Tensor:
    """apply_rope(x, cos, sin, positions) in float64, with the mistake `variant` switched on."""
    x = x.double()
    length, d_head = x.shape[-2:]
    if variant == "unchanged":
        return x
    if positions is None or variant == "ignores_positions":
        positions = torch.arange(length) + (1 if variant == "default_from_one" and positions is None else 0)
    elif variant == "wrapped":
        positions = positions % cos.shape[0]
    c, s = cos.double()[positions], sin.double()[positions]
    if variant == "swapped_tables":
        c, s = s, c
    elif variant == "minus_angle":
        s = -s
    if variant == "rotate_half":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2:]
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    if variant == "halves_in":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2:]
    elif variant == "pair_read_swapped":
        x1, x2 = x[..., 1::2], x[..., 0::2]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    if variant == "tables_repeated":
        rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)
        return x * torch.cat((c, c), dim=-1) + rotated * torch.cat((s, s), dim=-1)
    first = x1 * c - x2 * s
    second = (first if variant == "even_rotated_first" else x1) * s + x2 * c
    if variant == "halves_out":
        return torch.cat((first, second), dim=-1)
    if variant == "pair_written_swapped":
        return torch.stack((second, first), dim=-1).flatten(-2)
    return torch.stack((first, second), dim=-1).flatten(-2)


ROPE_MISTAKES = variants("rope", {
    "your apply_rope returns x unchanged: every row but those at position 0 must be rotated": "unchanged",
    "your pairs are (i, i + Dh/2), the \"rotate_half\" layout of Hugging Face and GPT-NeoX: this kit pairs "
    "adjacent features (2i, 2i+1), as Meta's LLaMA and the RoFormer paper do (x[..., 0::2] with x[..., 1::2])":
        "rotate_half",
    "you rotate adjacent pairs but write the results back as two halves (torch.cat): put each pair's two "
    "features back side by side, at 2i and 2i+1 (stack on a new last dimension, then flatten)": "halves_out",
    "you read the pairs as the two halves (x[..., :Dh // 2] with x[..., Dh // 2:]) but write them back side by "
    "side: this kit's pairs are adjacent features (2i, 2i+1) both ways, x[..., 0::2] with x[..., 1::2]": "halves_in",
    "your rotation turns the wrong way (by minus the angle): out[2i] = x[2i] * cos - x[2i+1] * sin and "
    "out[2i+1] = x[2i] * sin + x[2i+1] * cos": "minus_angle",
    "you swapped the cos and sin tables: c comes from cos, s from sin": "swapped_tables",
    "your apply_rope ignores `positions` and always uses rows 0 .. T-1 of the tables: row t of x sits at "
    "positions[t] (after a cache, that is not t)": "ignores_positions",
    "your default positions start at 1: without `positions`, row t of x sits at position t, from 0":
        "default_from_one",
    "your tables are repeated as cat((cos, cos)) for adjacent pairs (the \"rotate_every_two\" trick with "
    "Hugging Face's tables): features 2i and 2i+1 must both use pair i's angle (repeat_interleave), not "
    "columns 2i and 2i+1 of the repeated table": "tables_repeated",
    "your second formula uses the already rotated even features (x[..., 0::2] was overwritten, or is a view "
    "of what you wrote): compute both from the original pair": "even_rotated_first",
    "you read each pair the other way round, (x[2i+1], x[2i]): the pair's first feature is the even one, "
    "x1 = x[..., 0::2], x2 = x[..., 1::2]": "pair_read_swapped",
    "you write each rotated pair back the other way round, the second result at 2i: out[2i] = x[2i] * cos - "
    "x[2i+1] * sin and out[2i+1] = x[2i] * sin + x[2i+1] * cos (stack((first, second), dim=-1))":
        "pair_written_swapped",
})
ROPE_IN_FLOAT32 = mistake("rope", "computed_in_float32",
                          "your apply_rope computes in float32 (x.float(), or complex64 numbers) and never casts back: "
                          "a float64 x must come back float64 (.type_as(x), as Meta's code ends)",
                          lambda x: torch.float32 if x.dtype == torch.float64 else None)
NEGATIVE_POSITIONS_WRAP = mistake(
    "rope", "negative_positions_wrap",
    "your apply_rope accepts negative positions: indexing the tables with -1 quietly reads their last row "
    "(Python indexing wraps around); check positions.min() >= 0 too",
    lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions, variant="wrapped")
    if bool((positions < 0).any()) else None)
ROPE_NO_GRAPH = "no autograd graph"
ROPE_WITHOUT_GRAPH = mistake("rope", "no_graph",
                             "your apply_rope's output is not computed from x with autograd (torch.no_grad(), "
                             "torch.inference_mode(), .detach(), or a new tensor): nothing before it (the projections "
                             "of q and k) would ever learn", lambda: ROPE_NO_GRAPH)
ROPE_IN_PLACE_MISTAKES = (
    mistake("rope", "rotated_in_place",
            "apply_rope wrote the rotation into the caller's x in place: build new tensors (torch.stack, torch.cat) "
            "and return them", lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions).to(x.dtype)),
    mistake("rope", "overwritten_in_place",
            "apply_rope overwrote the caller's x in place (x[..., 0::2] = ...), and used the overwritten even "
            "features for the odd ones",
            lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions, variant="even_rotated_first")),
)


# A family: the signs of the rotation's four terms slipped (minus_angle is the named member).
ROPE_SIGNS = mistake("rope", "signs",
                     "your rotation is out[2i] = {first} and out[2i+1] = {second}: it is out[2i] = x[2i] * cos - "
                     "x[2i+1] * sin and out[2i+1] = x[2i] * sin + x[2i+1] * cos", dict())
SIGN_SLIPS = [(a, b, d) for a in (-1, 1) for b in (-1, 1) for d in (-1, 1) if (a, b, d) not in ((-1, 1, 1), (1, -1, 1))]


def _signed(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None, signs: tuple[int, int, int]) -> Tensor:
    x = x.double()
    positions = torch.arange(x.shape[-2]) if positions is None else positions
    c, s = cos.double()[positions], sin.double()[positions]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    a, b, d = signs
    return torch.stack((x1 * c + a * x2 * s, b * x1 * s + d * x2 * c), dim=-1).flatten(-2)


def _sign_text(signs: tuple[int, int, int]) -> str:
    a, b, d = signs
    first = f"x[2i] * cos {'+' if a > 0 else '-'} x[2i+1] * sin"
    second = f"{'' if b > 0 else '-'}x[2i] * sin {'+' if d > 0 else '-'} x[2i+1] * cos"
    return ROPE_SIGNS.text(first=first, second=second)


def rope_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None) -> Mistakes:
    """For apply_rope(x, cos, sin, positions); also the terms' signs slipped (SIGN_SLIPS)."""
    family = {_sign_text(k): (lambda k=k: _signed(x, cos, sin, positions, k)) for k in SIGN_SLIPS}
    return besides(simulated(ROPE_MISTAKES, lambda variant: rope_rotated(x, cos, sin, positions, variant=variant)),
                   family)


ROPE_ROWS_CACHED = mistake(
    "rope", "rows_cached_by_length",
    "your apply_rope keeps the rows it looked up on an earlier call with the same sequence length and uses them "
    "again (a cache keyed by the length only): a later call at other positions is rotated by the earlier "
    "positions' angles; look up the rows of each call's own positions",
    lambda x, cos, sin, earlier: rope_rotated(x, cos, sin, earlier))


def rope_stale_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, earlier: Tensor) -> Mistakes:
    """For apply_rope(x, cos, sin, positions) called again with the same tables, after a call of the same length at
    the positions `earlier`."""
    stale = {} if torch.equal(earlier, positions) else bind([ROPE_ROWS_CACHED], x, cos, sin, earlier)
    return {**rope_mistakes(x, cos, sin, positions), **stale}


def rope_dtype_mistakes(x: Tensor) -> Mistakes:
    """For the dtype of apply_rope's result."""
    return bind([ROPE_IN_FLOAT32], x)


def rope_wrapped_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor) -> Mistakes:
    """For what apply_rope returned instead of rejecting a negative position."""
    return bind([NEGATIVE_POSITIONS_WRAP], x, cos, sin, positions)


def rope_grad_mistakes() -> Mistakes:
    """For what went wrong when backpropagating through apply_rope (ROPE_NO_GRAPH: backward found nothing)."""
    return bind([ROPE_WITHOUT_GRAPH])


def rope_in_place_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None) -> Mistakes:
    """For x as it is after apply_rope(x, cos, sin, positions)."""
    return bind(ROPE_IN_PLACE_MISTAKES, x, cos, sin, positions)


# --- tiny_lm -----------------------------------------------------------------------------------------
# A LLaMA-style model in float64 from plain operations, with the mistake `variant` switched on. `chunks`
# feed the model the way a cached decode does (one call per chunk, keys and values kept per block).

def lm_rope_tables(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[Tensor, Tensor]:
    """The contract's tables, computed in float32 as rope_angles does: (max_len, head_dim // 2) each."""
    freqs = 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * freqs
    return torch.cos(angles), torch.sin(angles)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, start: int) -> Tensor:
    """Adjacent pairs (2i, 2i+1) of x (B, H, T, Dh) rotated at positions start .. start + T - 1."""
    c, s = cos[start:start + x.size(-2)].double(), sin[start:start + x.size(-2)].double()
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.stack([even * c - odd * s, even * s + odd * c], dim=-1).flatten(-2)


def _rms(x: Tensor, weight: Tensor, eps: float = 1e-5) -> Tensor:
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.double()


def _attention(s: dict[str, Tensor], p: str, x: Tensor, n_heads: int, n_kv_heads: int, rope, mask, cache,
               causal: bool) -> Tensor:
    B, T, D = x.shape
    dh = D // n_heads

    def heads(t: Tensor, n: int) -> Tensor:
        return t.view(B, T, n, dh).transpose(1, 2)

    q = heads(x @ s[p + "w_q.weight"].double().T, n_heads)
    k = heads(x @ s[p + "w_k.weight"].double().T, n_kv_heads)
    v = heads(x @ s[p + "w_v.weight"].double().T, n_kv_heads)
    start = 0 if cache is None else sum(t.size(-2) for t in cache[0])
    if rope is not None:
        q, k = _rotate(q, *rope, start), _rotate(k, *rope, start)
    if cache is not None:
        cache[0].append(k)
        cache[1].append(v)
        k, v = torch.cat(cache[0], dim=-2), torch.cat(cache[1], dim=-2)
    rep = n_heads // n_kv_heads
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(dh)
    if cache is not None and causal:
        mask = torch.ones(T, k.size(-2), dtype=torch.bool).tril(k.size(-2) - T)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(B, T, D) @ s[p + "out_proj.weight"].double().T


def _swiglu(s: dict[str, Tensor], p: str, x: Tensor) -> Tensor:
    gate = F.silu(x @ s[p + "w_gate.weight"].double().T)
    return (gate * (x @ s[p + "w_up.weight"].double().T)) @ s[p + "w_down.weight"].double().T


def decoder_block(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, *, rope=None, mask=None,
                  cache=None, variant: str = "", prefix: str = "", causal: bool = True, eps: float = 1e-5) -> Tensor:
    """DecoderBlock(..., eps) in float64; `cache` a pair of lists (keys, values) that this call appends to."""
    s, x = state, x.double()
    eps1 = 1e-5 if variant in ("attn_norm_without_eps", "norms_without_eps") else eps
    eps2 = 1e-5 if variant in ("ffn_norm_without_eps", "norms_without_eps") else eps
    second_norm = prefix + ("attn_norm" if variant == "shared_norm" else "ffn_norm") + ".weight"

    def attn(inp: Tensor) -> Tensor:
        return _attention(s, prefix + "attn.", inp, n_heads, n_kv_heads, rope, None if variant == "no_mask" else mask,
                          cache, causal)

    first_norm = prefix + ("ffn_norm" if variant == "one_norm_object" else "attn_norm") + ".weight"

    def norm1(inp: Tensor) -> Tensor:
        return _rms(inp, s[first_norm], eps1)

    def norm2(inp: Tensor) -> Tensor:
        return _rms(inp, s[second_norm], eps2)

    def ffn(inp: Tensor) -> Tensor:
        return _swiglu(s, prefix + "ffn.", inp)

    if variant == "post_norm":
        h = norm1(x + attn(x))
        return norm2(h + ffn(h))
    if variant in BLOCK_READS:  # a branch that reads another tensor in scope
        n = norm1(x)
        a = attn(x if variant == "reads_attn_x" else n)
        h = a if variant == "reads_attn_without_residual" else x + a
        inputs = {"reads_ffn_norm_x": lambda: norm2(x), "reads_ffn_h": lambda: h, "reads_ffn_norm_attn": lambda: norm2(a)}
        return h + ffn(inputs.get(variant, lambda: norm2(h))())
    if variant == "attn_residual_from_normed":
        n = norm1(x)
        h = n + attn(n)
    else:
        h = x + attn(norm1(x))
    if variant == "ffn_residual_from_x":
        return x + ffn(norm2(h))
    if variant == "ffn_without_residual":
        return ffn(norm2(h))
    return h + ffn(norm2(h))


DECODER_BLOCK_MISTAKES = variants("tiny_lm", ((sentence, variant) for variant, sentence in {
    "post_norm": "your block normalises after each residual addition (post-norm, as the 2017 Transformer): "
                 "a pre-norm block normalises the input of each branch, h = x + attn(attn_norm(x)), "
                 "out = h + ffn(ffn_norm(h))",
    "attn_residual_from_normed": "your attention residual adds the normalised input: h = attn_norm(x) + "
                                 "attn(attn_norm(x)); the residual carries x itself, h = x + attn(attn_norm(x))",
    "ffn_residual_from_x": "your feed-forward residual adds x, not h: the second branch is added to the first's "
                           "result, out = h + ffn(ffn_norm(h))",
    "ffn_without_residual": "your block returns ffn(ffn_norm(h)) without adding h back (the second residual is "
                            "missing)",
    "shared_norm": "your feed-forward branch is normalised by attn_norm: it has its own, ffn_norm",
    "one_norm_object": "your attn_norm and ffn_norm are one RMSNorm object (self.ffn_norm = self.attn_norm): "
                       "loading ffn_norm's weight overwrote attn_norm's, so both branches use it; create two "
                       "separate RMSNorm(d_model, eps)",
    "no_mask": "your block does not pass the mask on to the attention",
}.items()))
# An eps the block is given but does not hand on to a norm (RMSNorm(d_model) keeps the default 1e-5).
BLOCK_EPS_MISTAKES = variants("tiny_lm", (
    ("your DecoderBlock does not pass its eps on to attn_norm: RMSNorm(d_model, eps)", "attn_norm_without_eps"),
    ("your DecoderBlock does not pass its eps on to ffn_norm: RMSNorm(d_model, eps)", "ffn_norm_without_eps"),
    ("your DecoderBlock does not pass its eps on to its norms: attn_norm = RMSNorm(d_model, eps), likewise "
     "ffn_norm", "norms_without_eps"),
))
BLOCK_VARIANTS = {m.name: m.sentence for m in DECODER_BLOCK_MISTAKES}  # variant -> sentence
# A family: one branch reading another tensor in scope than the pre-norm block's (x, attn_norm(x), the attention's
# output, h, ffn_norm of any of them); the residuals from the wrong tensor are named entries.
BLOCK_READ = mistake("tiny_lm", "block_reads",
                     "your block computes {h}, then {out}: a pre-norm block is h = x + attn(attn_norm(x)), then "
                     "out = h + ffn(ffn_norm(h)), each branch reading what the one before gave "
                     "(ffn_norm(x) would make a parallel block)", dict())
BLOCK_READS = {  # variant -> (h, out) as the sentence writes them
    "reads_attn_x": ("h = x + attn(x)", "out = h + ffn(ffn_norm(h))"),
    "reads_attn_without_residual": ("h = attn(attn_norm(x))", "out = h + ffn(ffn_norm(h))"),
    "reads_ffn_norm_x": ("h = x + attn(attn_norm(x))", "out = h + ffn(ffn_norm(x))"),
    "reads_ffn_h": ("h = x + attn(attn_norm(x))", "out = h + ffn(h)"),
    "reads_ffn_norm_attn": ("h = x + attn(attn_norm(x))", "out = h + ffn(ffn_norm(attn(attn_norm(x))))"),
}


def block_read_family(model: Callable[[str], Tensor]) -> Mistakes:
    """BLOCK_READ's members, `model(variant)` the output of the block (or the model) with that variant."""
    return {BLOCK_READ.text(h=h, out=out): (lambda v=variant: model(v)) for variant, (h, out) in BLOCK_READS.items()}


def decoder_block_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, n_kv_heads: int, rope, mask,
                           eps: float | None = None) -> Mistakes:
    """For DecoderBlock(..., eps) (None: the default) on x."""
    def model(variant: str) -> Tensor:
        return decoder_block(state, x, n_heads, n_kv_heads, rope=rope, mask=mask, variant=variant, eps=eps or 1e-5)
    entries = DECODER_BLOCK_MISTAKES + (BLOCK_EPS_MISTAKES if eps is not None else ())
    return besides(simulated(entries, model), block_read_family(model))


def tiny_lm(state: dict[str, Tensor], chunks: list[Tensor], *, n_heads: int, n_kv_heads: int, n_layers: int,
            max_len: int, rope_base: float = 10000.0, cached: bool = False, variant: str = "") -> Tensor:
    """TinyLM's logits (B, total T, V) in float64 for the token chunks fed one call each (with caches when
    `cached`, else a single chunk)."""
    d_model = state["tok_emb.weight"].size(1)
    base = 10000.0 if variant == "default_base" else rope_base
    rope = None if variant == "no_rope" else lm_rope_tables(max_len, d_model // n_heads, base)
    emb, head = state["tok_emb.weight"].double(), state["head.weight"].double()
    if variant == "tied_to_head":
        emb = head
    elif variant == "tied_to_embedding":
        head = emb
    caches = [([], []) for _ in range(n_layers)]
    if variant == "shared_cache":
        caches = [caches[0]] * n_layers
    out = []
    for chunk in chunks:
        x = emb[chunk]
        if variant == "scaled_embedding":
            x = x * math.sqrt(d_model)
        T = chunk.size(1)
        causal = variant != "no_causal_mask"
        mask = None if cached or not causal else torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(n_layers):
            block_variant = variant if variant in BLOCK_VARIANTS or variant in BLOCK_READS else ""
            x = decoder_block(state, x, n_heads, n_kv_heads, rope=rope, mask=mask, variant=block_variant,
                              cache=caches[i] if cached else None, causal=causal,
                              prefix=f"blocks.{n_layers - 1 if variant == 'shared_block' else i}.")
        logits = (x if variant == "no_final_norm" else _rms(x, state["norm.weight"])) @ head.T
        out.append(logits[:, -1:] if variant == "last_position_only" else logits)
    return torch.cat(out, dim=1)


TINY_LM_MISTAKES = tuple(m for m in DECODER_BLOCK_MISTAKES if m.name != "no_mask") + variants("tiny_lm", (
    (sentence, variant) for variant, sentence in {
    "no_final_norm": "your TinyLM applies the head to the last block's output directly: the final RMSNorm "
                     "(norm) comes first, head(norm(x))",
    "shared_block": "your blocks are one module repeated (nn.ModuleList([DecoderBlock(...)] * n_layers) holds the "
                    "same block n_layers times, so every layer has the last one's weights): make a new DecoderBlock "
                    "per layer",
    "last_position_only": "your TinyLM returns the logits of the last position only, (B, 1, vocab_size): forward "
                          "returns every position's, (B, T, vocab_size); generate picks the last one itself",
    "no_causal_mask": "your TinyLM attends to future positions without caches: give the blocks a causal mask "
                      "(True on and below the diagonal) when there are no caches",
    "no_rope": "your TinyLM does not give the blocks the RoPE tables (rope=(cos, sin)), so attention cannot "
               "tell positions apart",
    "default_base": "your RoPE tables ignore rope_base (they use 10000): pass it on to rope_angles",
    "tied_to_head": "your tok_emb and head share one weight (tied embeddings): the contract's are two separate "
                    "parameters, the head an nn.Linear(d_model, vocab_size, bias=False) of its own",
    "tied_to_embedding": "your head and tok_emb share one weight (tied embeddings): the contract's are two "
                         "separate parameters, the head an nn.Linear(d_model, vocab_size, bias=False) of its own",
    "scaled_embedding": "your TinyLM scales the embeddings by sqrt(d_model); the contract's feeds tok_emb(idx) "
                        "to the first block as it is",
}.items()))
TINY_LM_VARIANTS = {m.name: m.sentence for m in TINY_LM_MISTAKES}  # variant -> sentence
SHARED_CACHE = mistake("tiny_lm", "shared_cache", "your blocks share one KV cache: each block keeps the keys and values "
                       "of its own layer, so block i must get caches[i]", dict(variant="shared_cache"))


CACHES_MADE_ONCE = mistake(
    "tiny_lm", "caches_made_once",
    "your new_caches hands out the same caches on every call (made once and kept on the model): two prompts "
    "decoded with caches from two calls of new_caches fill one set of caches, so each one's new positions see the "
    "other's keys and values; make new, empty KVCaches on every call",
    lambda state, fed, config: tiny_lm(state, fed, cached=True, **config))


def tiny_lm_again_mistakes(state: dict[str, Tensor], chunks: list[Tensor], fed: list[Tensor], **config: Any
                           ) -> Mistakes:
    """For the logits of the last of `chunks` (one prompt's calls with its own caches so far), where `fed` holds
    every chunk the model was given with any caches, in order (this prompt's and another's, in turns)."""
    last = chunks[-1].shape[1]
    own = mapped(tiny_lm_mistakes(state, chunks, cached=True, **config), lambda full: full[:, -last:])
    stale = {} if len(fed) == len(chunks) else \
        mapped(bind([CACHES_MADE_ONCE], state, fed, config), lambda full: full[:, -last:])
    return {**own, **stale}


def tiny_lm_mistakes(state: dict[str, Tensor], chunks: list[Tensor], *, cached: bool = False, **config: Any
                     ) -> Mistakes:
    def model(variant: str) -> Tensor:
        return tiny_lm(state, chunks, cached=cached, variant=variant, **config)
    return besides(simulated([*TINY_LM_MISTAKES, *([SHARED_CACHE] if cached else [])], model), block_read_family(model))


# The attention's keys and values sized for another number of key/value heads than the block is given.
KV_HEADS_NOT_PASSED = mistake("tiny_lm", "kv_heads_not_passed",
                              "your blocks' attention has {count} key/value heads: build it as "
                              "GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False), and TinyLM gives "
                              "each DecoderBlock its n_kv_heads",
                              lambda d_model, n_heads, heads: torch.Size((heads * (d_model // n_heads), d_model)))


def kv_heads_mistakes(key: str, d_model: int, n_heads: int, n_kv_heads: int) -> Mistakes:
    """For the shape of a TinyLM's (or DecoderBlock's) attn.w_k / attn.w_v weight: n_heads or one key/value
    head where n_kv_heads are meant."""
    if not key.endswith(("attn.w_k.weight", "attn.w_v.weight")):
        return {}
    return {KV_HEADS_NOT_PASSED.text(count=words): KV_HEADS_NOT_PASSED.on(d_model, n_heads, heads)
            for words, heads in (("n_heads", n_heads), ("1", 1)) if heads != n_kv_heads}


HEAD_BIAS = recognised("tiny_lm", "head_bias", "your head has a bias: nn.Linear(d_model, vocab_size, bias=False)")
ROPE_TABLES_SAVED = recognised("tiny_lm", "rope_tables_saved",
                               "the RoPE tables are in your state dict: register them with register_buffer(name, table, "
                               "persistent=False); they are computed from max_len, not learned, so a checkpoint need "
                               "not hold them")
# The width the RoPE tables were built for, read from the stand-in's error, against what a divisor mistake gives.
ROPE_WIDTH_MISTAKES = (
    mistake("tiny_lm", "rope_for_d_model", "your RoPE tables are for head_dim = d_model: they rotate each head, so "
            "build them with rope_angles(max_len, d_model // n_heads)", lambda d_model, n_heads, n_kv_heads: d_model),
    mistake("tiny_lm", "rope_for_kv_heads", "your RoPE tables are for d_model // n_kv_heads features: they rotate "
            "each head, d_model // n_heads wide (the key/value heads are fewer, not wider)",
            lambda d_model, n_heads, n_kv_heads: d_model // n_kv_heads),
)
MAX_LEN_OFF_BY_ONE = recognised("tiny_lm", "max_len_off_by_one",
                                "your TinyLM rejects a sequence that ends at position max_len - 1 ({last}): positions "
                                "0 .. max_len - 1 all have RoPE tables; raise only when start + T > max_len")
MASK_WITH_CACHE = recognised("tiny_lm", "mask_with_cache",
                             "your TinyLM passes a causal mask together with the caches: with caches the attention "
                             "builds its own mask over the cached positions, so pass mask=None then")
SHARED_CACHES = recognised("tiny_lm", "shared_caches",
                           "new_caches returns the same KVCache object for every block ([KVCache()] * n repeats one "
                           "object): make a new one per block")


def tiny_lm_key_diagnosis(got: dict[str, Tensor], expected: set[str], max_len: int) -> str | None:
    """The diagnosis of a TinyLM state dict whose keys are not the contract's (`got`: key -> tensor)."""
    extra, missing = set(got) - expected, expected - set(got)
    if missing:
        return None
    if extra == {"head.bias"}:
        return HEAD_BIAS.text()
    if extra and all(got[k].dim() == 2 and got[k].size(0) == max_len for k in extra):
        return ROPE_TABLES_SAVED.text()
    return None


def rope_width(message: str) -> int | None:
    """The width the RoPE tables are for, from the error the stand-in apply_rope raised inside the model."""
    found = re.search(r"the tables are for (\d+)", message)
    return int(found[1]) if found else None


def rope_width_mistakes(d_model: int, n_heads: int, n_kv_heads: int) -> Mistakes:
    """Against `rope_width`: each mistake's width (the expected one is d_model // n_heads)."""
    return bind(ROPE_WIDTH_MISTAKES, d_model, n_heads, n_kv_heads)


def max_len_off_by_one_mistake(max_len: int) -> str:
    return MAX_LEN_OFF_BY_ONE.text(last=max_len - 1)


START_FROM_CACHE_COUNT = recognised("tiny_lm", "start_from_cache_count",
                                    "your first position with caches is len(caches), the number of blocks: it is the "
                                    "number of positions cached so far, len(caches[0])")


def mask_with_cache_mistake(message: str) -> str | None:
    return MASK_WITH_CACHE.text() if "mask" in message and "cache" in message else None


def shared_caches_mistake(ids: list[int]) -> str | None:
    return SHARED_CACHES.text() if len(ids) > 1 and len(set(ids)) == 1 else None


# --- grouped_query_attention -------------------------------------------------------------------------
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


def gqa_heads_error(message: str, n_heads: int, n_kv_heads: int, d_k: int) -> str | None:
    """The sentence of the mistake that an error of GroupedQueryAttention(n_heads * d_k, n_heads, n_kv_heads)'s
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
        return KV_SPLIT_N_HEADS.sentence
    found = ROPE_WIDTH.search(message)
    if found and width % n_heads == 0 and (int(found[1]), int(found[2])) == (width // n_heads, d_k):
        return KV_SPLIT_N_HEADS.sentence
    found = MISMATCHED_SIZES.search(message)
    if not found or int(found[1]) != n_heads or "dimension 1" not in message:
        return None
    # (sentence, the key/value heads it makes); None: a mistake that has no sentence here, which blocks the others
    made = [(KV_SPLIT_N_HEADS.sentence, n_heads * n_rep), (None, n_heads * n_rep), (None, n_kv_heads),
            *((GQA_N_REP.text(n_rep=name), n_kv_heads * size(n_heads, n_kv_heads)) for name, size in N_REP_SIZES.items())]
    matching = [sentence for sentence, count in made if count == int(found[2])]
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


# --- sampling ----------------------------------------------------------------------------------------
# filter_logits' models keep the input's dtype up to the top-k boundary (ties are exact there) and take
# top-p's probabilities in float64.

NEG_INF = float("-inf")


def _sorted_mass(p: Tensor, inclusive: bool) -> Tensor:
    """For each token, the mass sorted before it (ties in index order), with or without its own."""
    ordered, order = torch.sort(p, dim=-1, descending=True, stable=True)
    cum = ordered.cumsum(-1) if inclusive else ordered.cumsum(-1) - ordered
    return torch.empty_like(p).scatter(-1, order, cum)


def filtered(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
             variant: str = "", k_offset: int = 0) -> Tensor | None:
    """filter_logits with the mistake `variant` switched on, or top-k keeping top_k + k_offset entries (None
    where that is not a count of entries below the vocabulary's)."""
    if variant == "temperature_times":
        x = logits * temperature
    elif variant in ("no_temperature", "temperature_last"):
        x = logits.clone()
    else:
        x = logits / temperature
    scaled = x
    if k_offset:
        if top_k is None or not 1 <= top_k + k_offset < x.shape[-1] or top_k >= x.shape[-1]:
            return None
        top_k += k_offset
    if top_k is not None and top_k < x.shape[-1]:
        if variant == "topk_exact":
            keep = torch.zeros_like(x, dtype=torch.bool).scatter(-1, x.topk(top_k, dim=-1).indices, True)
            x = x.masked_fill(~keep, NEG_INF)
        else:
            kth = x.topk(top_k, dim=-1).values[..., -1:]
            x = x.masked_fill(x <= kth if variant == "topk_strict" else x < kth, NEG_INF)
    if top_p is not None:
        p = (scaled if variant == "topp_before_topk" else x).double().softmax(-1)
        if variant == "topp_inclusive":
            above = (p.unsqueeze(-2) * (p.unsqueeze(-2) >= p.unsqueeze(-1))).sum(-1)
        elif variant == "topp_sorted_ties":
            above = _sorted_mass(p, inclusive=False)
        elif variant == "topp_unsorted":
            above = p.cumsum(-1) - p
        else:
            above = (p.unsqueeze(-2) * (p.unsqueeze(-2) > p.unsqueeze(-1))).sum(-1)
        x = x.masked_fill(above >= top_p, NEG_INF)
    if variant == "temperature_last":
        x = x / temperature
    return x


FILTER_MISTAKES = variants("sampling", {
    "your filter multiplies the logits by the temperature: divide them by it (a temperature below 1 sharpens "
    "the distribution)": "temperature_times",
    "your filter ignores the temperature: the kept entries are logits / temperature": "no_temperature",
    "you divide by the temperature after top-p: top-p's probabilities are those of logits / temperature, so "
    "divide first": "temperature_last",
    "your top-k keeps only the entries strictly above the top_k-th largest value: keep those at or above it "
    "(fill where logits < kth)": "topk_strict",
    "your top-k keeps exactly top_k entries (the indices torch.topk returns), dropping entries tied with the "
    "top_k-th largest value: keep every entry at or above that value": "topk_exact",
    "your top-p counts each token's own probability in the mass above it (a cumulative sum without the shift), "
    "so it removes the token that crosses top_p: a token stays while the mass strictly more probable than it "
    "is below top_p": "topp_inclusive",
    "your top-p keeps only some of the tokens tied at the boundary (a cumulative sum over the sorted order "
    "tells tied tokens apart): a token's mass counts only the tokens strictly more probable than it, so tied "
    "tokens stay or go together": "topp_sorted_ties",
    "your top-p sums the probabilities in vocabulary order: sort them from most to least probable first "
    "(or sum, for each token, the probabilities greater than its own)": "topp_unsorted",
    "your top-p works on the probabilities before top-k: take the softmax of what top-k left": "topp_before_topk",
})
TOP_K_OFF_BY_ONE = mistake("sampling", "top_k_off_by_one",
                           "your top-k keeps the {kept} largest logits: it keeps the top_k largest (and any tied "
                           "with the top_k-th), logits.topk(top_k).values[..., -1:] being the smallest kept", dict())
FINITE_FILL = mistake("sampling", "finite_fill",
                      "your filter fills the removed entries with {fill:g}: the contract's are -inf, so that their "
                      "softmax weight is exactly 0", lambda want, fill: want.masked_fill(want == NEG_INF, fill))
LOGITS_DIVIDED_IN_PLACE = mistake("sampling", "logits_divided_in_place",
                                  "filter_logits divided the caller's logits in place (logits /= temperature): "
                                  "compute a new tensor", lambda logits, temperature: logits / temperature)
DRAW_MISTAKES = (
    mistake("sampling", "softmax_twice",
            "you take the softmax before filter_logits and again after it: filter the logits, then take the "
            "softmax once",
            lambda row, temperature, top_k, top_p: filtered(row.double().softmax(-1), temperature, top_k,
                                                            top_p).softmax(-1)),
    mistake("sampling", "unfiltered_softmax",
            "you draw from the unfiltered softmax: the probabilities are softmax(filter_logits(logits, ...))",
            lambda row, temperature, top_k, top_p: row.double().softmax(-1)),
    mistake("sampling", "softmax_over_rows",
            "your softmax runs over the rows (dim=0), not over the vocabulary: each row's probabilities are "
            "softmax(filter_logits(logits, ...), dim=-1)",
            lambda row, temperature, top_k, top_p: _uniform_over_kept(filtered(row, temperature, top_k, top_p))),
)


def _uniform_over_kept(kept_row: Tensor) -> Tensor:
    """What draws from one row repeated give with a softmax over the rows: every kept token alike (its column is
    one value repeated); None where a removed token makes NaN of its column."""
    finite = torch.isfinite(kept_row).double()
    return None if not bool(finite.all()) else finite / finite.sum()


def _finite_fill(got: Tensor, want: Tensor) -> float | None:
    """The one finite constant `got` holds wherever `want` is -inf, if it is low or 0 (a fill that is not -inf:
    a large negative constant, or the zero a learner takes for "nothing")."""
    removed = want == NEG_INF
    if not isinstance(got, Tensor) or got.shape != want.shape or not bool(removed.any()):
        return None
    fill = _masked_value(got[removed])
    return fill if fill is not None and math.isfinite(fill) and (fill <= -1e4 or fill == 0) else None


def _same(a: Any, b: Any) -> bool:
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.shape != b.shape:
        return False
    a, b = a.double(), b.double()
    return bool(((a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= 1e-4 * (1 + b.abs())))).all())


def judged_whole(mistakes: Mistakes, got: Any, fn: Callable[[Any], Any]) -> Mistakes:
    """For a check of `fn(got)` (a part of what came back): a mistake is named only where the whole of `got`
    matches its output, not where the part happens to; one whose part differs from `got`'s is weighed (and
    so ruled out) on its part."""
    def part(model: Any) -> Any:
        whole = model() if callable(model) else model
        if _same(got, whole):
            return fn(got)
        if whole is None:
            return None
        mine = fn(whole)
        return None if _same(mine, fn(got)) else mine
    return {s: (lambda m=m: part(m)) for s, m in mistakes.items()}


def unambiguous(mistakes: Mistakes) -> Mistakes:
    """The mistakes whose output no other mistake of the mapping shares on these inputs (the others give None):
    where two mistakes look the same, naming either could be wrong. Still lazy: every output is computed
    once, when the first is weighed (a check that passes weighs none)."""
    values: dict[str, Any] = {}

    def computed() -> dict[str, Any]:
        if not values:
            for sentence, model in mistakes.items():
                try:
                    values[sentence] = model() if callable(model) else model
                except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
                    values[sentence] = None
        return values

    def model_of(sentence: str) -> Any:
        mine = computed()[sentence]
        return None if any(o != sentence and _same(mine, w) for o, w in values.items()) else mine

    return {sentence: (lambda s=sentence: model_of(s)) for sentence in mistakes}


EMPTY_ROW = recognised("sampling", "empty_row",
                       "your filter removed every token of a row: the most probable token has no mass above it, so it "
                       "always stays (a token stays while the mass strictly more probable than it is below top_p)")


# A filter done in sorted order (torch.sort's values) and returned so, without putting each entry back at its
# token's index: the sorted values of what the filter keeps, its top-k or top-p worked out either way that sorted
# order suggests (every tie kept, or the boundary's ties cut by position: topk_exact, topp_sorted_ties).
SORTED_ORDER = mistake(
    "sampling", "sorted_order",
    "your filter returns its result in sorted order (the values of torch.sort, most probable first), not in the "
    "vocabulary's: entry j must stay token j's logit; filter in sorted order if you like, then put the entries back "
    "at their indices (torch.empty_like(logits).scatter(-1, sorted_idx, sorted_logits)), or scatter the sorted "
    "mask back and fill the original logits with it",
    lambda logits, got, temperature, top_k, top_p: _in_sorted_order(logits, got, temperature, top_k, top_p))
SORTED_ORDER_VARIANTS = ("", "topk_exact", "topp_sorted_ties")


def _in_sorted_order(logits: Tensor, got: Any, temperature: float, top_k: int | None, top_p: float | None) -> Tensor:
    """The filter's result sorted along the vocabulary, its filters worked out as SORTED_ORDER_VARIANTS do: the one
    that is what came back (`got`), else the contract's filter sorted (which rules the mistake out)."""
    results = [filtered(logits, temperature, top_k, top_p, variant) for variant in SORTED_ORDER_VARIANTS]
    ordered = [r.sort(dim=-1, descending=True).values for r in results if r is not None]
    return next((r for r in ordered if _same(got, r)), ordered[0])


# A top-p mask worked out in sorted order and applied to the logits as they are: it keeps the first tokens of the
# vocabulary, as many as top-p keeps.
SORTED_MASK_UNSORTED = mistake(
    "sampling", "sorted_mask_unsorted",
    "your top-p mask is worked out in sorted order (the cumsum of the sorted probabilities) but applied to the "
    "logits in the vocabulary's order, so it keeps the first tokens of the vocabulary instead of the most probable: "
    "put the mask back at the tokens' indices (mask.scatter(-1, sorted_idx, sorted_mask)) before masked_fill",
    lambda logits, temperature, top_k, top_p: _sorted_mask_unsorted(logits, temperature, top_k, top_p))


def _sorted_mask_unsorted(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None
                          ) -> Tensor | None:
    before = filtered(logits, temperature, top_k, None)  # what the top-p step is given
    if top_p is None or before is None:
        return None
    probs = before.double().softmax(dim=-1).sort(dim=-1, descending=True).values
    kept = ((probs.cumsum(dim=-1) - probs) < top_p).sum(dim=-1, keepdim=True)  # by position in sorted order
    return before.masked_fill(torch.arange(logits.shape[-1]) >= kept, float("-inf"))


def filter_mistakes(logits: Tensor, got: Any, want: Tensor, temperature: float = 1.0, top_k: int | None = None,
                    top_p: float | None = None) -> Mistakes:
    """For filter_logits(logits, ...): `got` is what came back, `want` the right answer; also the result left in
    sorted order (SORTED_ORDER, fitted to `got` among the ways a sorted filter goes)."""
    family = {TOP_K_OFF_BY_ONE.text(kept=_plus("top_k", k)): (lambda k=k: filtered(logits, temperature, top_k, top_p,
                                                                                  k_offset=k)) for k in (-1, 1)}
    family.update(bind([SORTED_ORDER], logits, got, temperature, top_k, top_p))
    family.update(bind([SORTED_MASK_UNSORTED], logits, temperature, top_k, top_p))
    mistakes = unambiguous({**simulated(FILTER_MISTAKES, lambda variant: filtered(logits, temperature, top_k, top_p,
                                                                                variant)), **family})
    fill = _finite_fill(got, want)
    if fill is not None:
        mistakes.update(bind([FINITE_FILL], want, fill, fill=fill))
    return mistakes


def divided_in_place_mistakes(logits: Tensor, temperature: float) -> Mistakes:
    return bind([LOGITS_DIVIDED_IN_PLACE], logits, temperature)


def distribution_mistakes(row: Tensor, temperature: float, top_k: int | None, top_p: float | None) -> Mistakes:
    """For the frequencies of many draws from one logits row (V,): the distributions mistakes draw from.

    All of them, even those that share a distribution here: frequencies are compared loosely, so hiding
    two that coincide could leave a third, merely near, to be named alone (the engine says when several fit):
    a top-k of top_k - 1 draws what a strict top-k draws where no value ties, so both are weighed."""
    def drawn(k: int) -> Tensor | None:
        kept = filtered(row, temperature, top_k, top_p, k_offset=k)
        return None if kept is None else kept.double().softmax(-1)
    return {**simulated(FILTER_MISTAKES,
                        lambda variant: filtered(row, temperature, top_k, top_p, variant).double().softmax(-1)),
            **{TOP_K_OFF_BY_ONE.text(kept=_plus("top_k", k)): (lambda k=k: drawn(k)) for k in (-1, 1)},
            **bind(DRAW_MISTAKES, row, temperature, top_k, top_p)}


MULTINOMIAL_OF_LOGITS = recognised("sampling", "multinomial_of_logits",
                                   "you handed the logits to torch.multinomial, which takes probabilities "
                                   "(non-negative weights, no -inf): take the softmax of the filtered logits first")


def draw_error_diagnosis(message: str, filtered_rows: Any) -> Mistake | None:
    """For torch.multinomial's complaint about its input: which mistake fed it, given what the submission's own
    filter_logits returns for the same logits and settings."""
    if "probability tensor contains" not in message or not isinstance(filtered_rows, Tensor):
        return None
    if bool((filtered_rows == NEG_INF).all(-1).any()):
        return EMPTY_ROW
    if filtered_rows.dim() > 1 and bool((filtered_rows == NEG_INF).all(0).any()):
        return None  # a softmax over the rows (dim 0) makes NaN of a token every row removed, as the logits would
    return MULTINOMIAL_OF_LOGITS


KTH_WITHOUT_ITS_DIMENSION = recognised(
    "sampling", "kth_without_its_dimension",
    "your top-k threshold lost its dimension: topk(...).values[..., -1] is (B,), which lines up with the "
    "vocabulary axis when compared with (B, V) logits; keep it, values[..., -1:], (B, 1)")


TOP_K_ABOVE_VOCAB = recognised(
    "sampling", "top_k_above_vocab",
    "your filter calls topk(top_k) with a top_k larger than the vocabulary, which torch refuses: a top_k of V or "
    "more keeps every entry, so filter only when top_k < V (or use min(top_k, V))")


def top_k_above_vocab(message: str, top_k: int | None, vocab: int) -> bool:
    """Whether an error is torch.topk's refusal of a k beyond the vocabulary."""
    return top_k is not None and top_k > vocab and "selected index k out of range" in message


def kth_without_its_dimension(message: str, logits_shape: tuple[int, ...]) -> bool:
    """Whether an error says that a (B,) threshold met (B, V) logits."""
    return len(logits_shape) == 2 and mismatched_sizes(message) == {logits_shape[0], logits_shape[-1]}


GREEDY_FILTERS = recognised("sampling", "greedy_filters",
                            "with temperature 0, sample_next_token called filter_logits, which rejects it: "
                            "temperature 0 is the argmax of the logits, with no filter and no draw")


KEPT_DIMENSION = mistake("sampling", "kept_dimension",
                        "you returned shape (B, 1): torch.multinomial(probs, 1) and argmax(keepdim=True) keep a "
                        "dimension; squeeze it to (B,)", lambda batch, vocab: torch.Size((batch, 1)))


def _first_of_tied(logits: Tensor, got: Any) -> Any:
    """`got` if it is a maximum of each row of `logits` (not necessarily the first), else None."""
    batch, vocab = logits.shape
    if not isinstance(got, Tensor) or got.shape != (batch,) or got.dtype != torch.int64:
        return None
    if not bool(((got >= 0) & (got < vocab)).all()):
        return None
    is_max = logits == logits.amax(-1, keepdim=True)
    return got if bool(is_max.gather(1, got[:, None]).all()) else None


GREEDY_MISTAKES = (
    mistake("sampling", "argmax_over_batch",
            "you took the argmax over dim 0 (the batch): the vocabulary is the last dimension",
            lambda logits, got: torch.Size((logits.shape[1],)) if logits.shape[1] != logits.shape[0] else None),
    mistake("sampling", "last_of_tied", "your greedy pick takes the last of tied maxima: argmax's is the first",
            lambda logits, got: logits.shape[1] - 1 - logits.flip(-1).argmax(-1)),
    mistake("sampling", "argmax_flat",
            "your greedy pick is argmax() without a dim, one index into the whole flattened batch: take each "
            "row's, logits.argmax(dim=-1), (B,)",
            lambda logits, got: torch.Size(())),
    mistake("sampling", "some_maximum",
            "your greedy pick is a maximum, but not always the first of tied maxima (a draw at a tiny "
            "temperature?): temperature 0 is the argmax, which takes the first", _first_of_tied),
)
DREW_OVER_BATCH = mistake("sampling", "drew_over_batch",
                          "you drew along dim 0 (the batch): the vocabulary is the last dimension",
                          lambda batch, vocab: torch.Size((vocab,)) if vocab != batch else None)


def greedy_mistakes(logits: Tensor, got: Any) -> Mistakes:
    """For sample_next_token(logits (B, V), temperature=0)."""
    first, *rest = GREEDY_MISTAKES
    return {**bind([first], logits, got), **bind([KEPT_DIMENSION], *logits.shape), **bind(rest, logits, got)}


def draw_shape_mistakes(batch: int, vocab: int) -> Mistakes:
    return bind([KEPT_DIMENSION, DREW_OVER_BATCH], batch, vocab)


GLOBAL_RANDOMNESS = recognised("sampling", "global_randomness",
                               "your draws use torch's global random state (torch.multinomial, torch.rand or "
                               "torch.manual_seed without generator=): take every random number from `generator`")
GENERATOR_IGNORED = recognised("sampling", "generator_ignored",
                               "your draws do not depend on `generator`: two generators seeded differently gave the "
                               "same tokens (a generator of your own, seeded the same at every call?)")


# generate: each forward call as (positions the caches held before it, which cache list (0: the first that
# new_caches made during generate), the slice [start, stop) of the output that it fed)

def fed_slice(tokens: Tensor, out: Tensor, held: int | None, call: int, prompt: int) -> tuple[int, int] | None:
    length = tokens.shape[-1]
    starts = [held if held is not None else 0, 0, prompt + call - 1] + list(range(out.shape[-1] - length + 1))
    for start in starts:
        if 0 <= start and start + length <= out.shape[-1] and tokens.shape == out[:, start:start + length].shape \
                and bool((tokens == out[:, start:start + length]).all()):
            return start, start + length
    return None


def call_pattern(calls: list[dict], out: Tensor, prompt: int) -> list[tuple]:
    return [(c["held"], c["caches"], fed_slice(c["tokens"], out, c["held"], i, prompt)) for i, c in enumerate(calls)]


def expected_pattern(prompt: int, new: int, caches: int = 0) -> list[tuple]:
    """What generate's calls look like, without the optional call that feeds the last token; `caches` is the
    index of the cache list this generate made (one per call of generate)."""
    return [(0, caches, (0, prompt))] + [(prompt + i - 1, caches, (prompt + i - 1, prompt + i))
                                         for i in range(1, new)]


OLD_CACHES_REUSED = mistake("sampling", "old_caches_reused",
                            "your second generate reused the caches of the first one, so the new prompt came after the "
                            "old sequence: make fresh caches (model.new_caches()) at every call of generate",
                            lambda pattern: pattern if pattern and pattern[0][1] == 0 and pattern[0][0] else None)
PROMPT_WITHOUT_CACHES = mistake("sampling", "prompt_without_caches",
                                "you ran the prompt without caches: make them once with model.new_caches() and pass "
                                "caches=caches on every call", lambda prompt, new, max_len: [(None, None, (0, prompt))])


def _refed(prompt: int, new: int, max_len: int) -> list[tuple]:
    refed, held = [], 0
    for i in range(new):
        refed.append((held, 0, (0, prompt + i)))
        held += prompt + i
        if held > max_len:
            break
    return refed


GENERATE_CALL_MISTAKES = (
    mistake("sampling", "no_caches",
            "your generate runs the whole sequence through the model at every step, without caches: make the caches "
            "once (model.new_caches()), run the prompt through once, then feed only the newest token with "
            "caches=caches", lambda prompt, new, max_len: [(None, None, (0, prompt + i)) for i in range(new)]),
    mistake("sampling", "sequence_refed",
            "you feed the whole sequence again at every step although the caches already hold it: the model then sees "
            "those tokens a second time, at new positions; after the prompt, feed only the newest token, (B, 1)",
            _refed),
    mistake("sampling", "fresh_caches_every_step",
            "you make fresh caches at every step (and feed the whole sequence into them): make them once, before the "
            "prompt, and keep them for the whole loop",
            lambda prompt, new, max_len: [(0, i, (0, prompt + i)) for i in range(new)]),
    mistake("sampling", "newest_token_without_caches",
            "you feed the newest token alone but without the caches, so the model sees a one-token sequence and "
            "forgets the prompt: pass caches=caches (made once by model.new_caches()) on every call",
            lambda prompt, new, max_len: [(None, None, (0, prompt))]
            + [(None, None, (prompt + i - 1, prompt + i)) for i in range(1, new)]),
    mistake("sampling", "fresh_caches_newest_token",
            "you make fresh caches at every step (model.new_caches() inside the loop), so each new token meets empty "
            "caches and sees no context: make them once, before the prompt, and pass the same list on every call",
            lambda prompt, new, max_len: [(0, 0, (0, prompt))]
            + [(0, i, (prompt + i - 1, prompt + i)) for i in range(1, new)]),
)


def reused_caches_mistakes(pattern: list[tuple]) -> Mistakes:
    """For the calls of a second generate on the same model: the first call found the old caches."""
    return bind([OLD_CACHES_REUSED], pattern)


def generate_call_mistakes(prompt: int, new: int, max_len: int) -> Mistakes:
    if new < 2:  # one call: only whether it had the caches shows
        return bind([PROMPT_WITHOUT_CACHES], prompt, new, max_len)
    return bind(GENERATE_CALL_MISTAKES, prompt, new, max_len)


def decoded(logits_of: Callable[[Tensor], Tensor], idx: Tensor, new: int, first: int = -1) -> Tensor:
    """Greedy decoding by the full, uncached model (`logits_of(seq) -> (B, L, V)`), the first token chosen from
    position `first` of the prompt's logits (later calls feed one token, whose only position is the last)."""
    seq = idx
    for step in range(new):
        logits = logits_of(seq)[:, first if step == 0 else -1]
        seq = torch.cat([seq, logits.argmax(-1, keepdim=True)], dim=1)
    return seq


GENERATE_MISTAKES = (
    mistake("sampling", "first_position_logits",
            "you choose each token from the logits of the first position ([:, 0]): the next token follows the last "
            "one, [:, -1]",
            lambda logits_of, idx, new: decoded(logits_of, idx, new, first=0) if idx.shape[1] > 1 else None),
    mistake("sampling", "new_tokens_only",
            "you returned only the new tokens: generate returns the prompt followed by them, (B, T + max_new_tokens)",
            lambda logits_of, idx, new: torch.Size((idx.shape[0], new)) if idx.shape[1] else None),
    mistake("sampling", "new_tokens_prepended",
            "you put each new token in front of the sequence (torch.cat([step, out])), so the result holds the new "
            "tokens last to first, then the prompt: append each one, torch.cat([out, step], dim=1)",
            lambda logits_of, idx, new: _prepended(decoded(logits_of, idx, new), idx.shape[1]) if new > 1 else None),
)


def _prepended(seq: Tensor, prompt: int) -> Tensor:
    """`seq` as a generate that puts each new token in front of what it has: the new tokens reversed, the prompt."""
    return torch.cat([seq[:, prompt:].flip(1), seq[:, :prompt]], dim=1)


def generate_mistakes(logits_of: Callable[[Tensor], Tensor], idx: Tensor, new: int) -> Mistakes:
    return bind(GENERATE_MISTAKES, logits_of, idx, new)


LENGTH_AT_MAX_LEN = recognised("sampling", "length_at_max_len",
                               "your length check rejects T + max_new_tokens == model.max_len, which fits (the last "
                               "token is never fed): raise only when it is greater")
LENGTH_PAST_MAX_LEN = recognised("sampling", "length_past_max_len",
                                 "you accept T + max_new_tokens == model.max_len + 1: the output must fit max_len "
                                 "positions (raise when T + max_new_tokens > model.max_len)")


# --- vit_classifier ----------------------------------------------------------------------------------
# The contract's ViT in float64 from plain operations (patch_embedding's `patches`, pre_ln_block's `block`),
# with the mistake `variant` switched on.

ROW_MAJOR = (0, 2, 4, 1, 3, 5)  # `patches` in the contract's order: row-major patches, (C, P, P) inside


def vit(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int, n_layers: int,
        variant: str = "", read: int = 0) -> Tensor:
    """ViT's logits (B, n_classes) in eval mode, float64; the head reads token `read` (0: the class token)."""
    s = {k: v.double() for k, v in state.items()}
    x = linear(patches(images.double(), patch_size, ROW_MAJOR), s, "patch_embed.proj")
    batch, n, d_model = x.shape
    cls, pos = s["cls_token"].reshape(1, 1, d_model).expand(batch, 1, d_model), s["pos_emb"]
    if variant == "pos_before_cls":
        x = torch.cat([cls, x + pos[:, :n]], dim=1)
    elif variant == "pos_before_cls_offset":
        x = torch.cat([cls, x + pos[:, 1:]], dim=1)
    elif variant == "pos_rows_from_zero":
        x = torch.cat([cls + pos[:, :1], x + pos[:, :n]], dim=1)
    elif variant in ("appended", "appended_head_last"):
        x = torch.cat([x, cls], dim=1) + pos
    elif variant == "no_positions":
        x = torch.cat([cls, x], dim=1)
    elif variant == "one_position":
        x = torch.cat([cls, x], dim=1) + pos[:, batch]
    elif variant in ("row_0", "row_last"):  # one row for every token (the last: the class token looks appended)
        x = torch.cat([cls, x], dim=1) + pos[:, 0 if variant == "row_0" else -1]
    else:
        x = torch.cat([cls, x], dim=1) + pos

    def norm(h: Tensor) -> Tensor:
        return F.layer_norm(h, (d_model,), s["norm.weight"], s["norm.bias"], eps=1e-5)

    if variant == "norm_before_blocks":
        x = norm(x)
    layers = {"last_block_skipped": range(n_layers - 1), "first_block_skipped": range(1, n_layers),
              "blocks_read_embedding": range(n_layers - 1, n_layers)}.get(variant, range(n_layers))
    for i in layers:
        p = f"blocks.{n_layers - 1 if variant == 'shared_blocks' else i}."
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril() if variant == "causal_blocks" else None
        out = block({k.removeprefix(p): v for k, v in s.items() if k.startswith(p)}, x, mask, n_heads)
        x = x + out if variant == "block_residual_added" else out
        if variant == "norm_every_block":
            x = norm(x)
    if variant not in ("no_final_norm", "norm_every_block", "norm_before_blocks"):
        x = norm(x)
    if variant == "mean_pool":
        pooled = x.mean(dim=1)
    elif variant == "patch_mean_pool":
        pooled = x[:, 1:].mean(dim=1)
    elif variant in ("head_last", "appended_head_last"):
        pooled = x[:, -1]
    elif variant == "first_image":
        pooled = x[0]
    else:
        pooled = x[:, read]
    return linear(pooled, s, "head")


VIT_MISTAKES = variants("vit_classifier", ((sentence, variant) for variant, sentence in {
    "appended": "your class token is appended after the patches, and the head reads position 0, which is then "
                "the first patch: prepend it, torch.cat([cls, patches], dim=1)",
    "appended_head_last": "your class token is appended after the patches (position N, read back with x[:, -1]): "
                          "the contract's is prepended at position 0, so it gets pos_emb[:, 0] and the head "
                          "reads x[:, 0]",
    "pos_before_cls": "your positions are added to the patches before the class token is prepended (rows 0 .. N-1 "
                      "to the patches, none to the class token): prepend first, then add all N + 1 rows",
    "pos_before_cls_offset": "your positions are added to the patches (rows 1 .. N) before the class token is "
                             "prepended, so the class token never gets pos_emb[:, 0]: prepend first, then add "
                             "pos_emb",
    "pos_rows_from_zero": "your patches get pos_emb rows 0 .. N-1 while the class token gets row 0 too: the class "
                          "token's is row 0 and the patches' rows 1 .. N (prepend first, then add pos_emb)",
    "no_positions": "your ViT never adds pos_emb: without positions the blocks see the patches as a set",
    "one_position": "your ViT adds one row of pos_emb (pos_emb[:, B], indexed by the batch size) to every "
                    "token: add the whole table, x + pos_emb, one row per position",
    "row_0": "your ViT adds pos_emb's row 0, the class token's, to every token (pos_emb[:, 0] or pos_emb[:, :1]): "
             "add the whole table, x + pos_emb, one row per position",
    "row_last": "your ViT adds pos_emb's last row (pos_emb[:, -1]) to every token: add the whole table, "
                "x + pos_emb, one row per position",
    "mean_pool": "your head reads the mean over all tokens (mean pooling): the contract's reads the class token, "
                 "head(norm(x)[:, 0])",
    "head_last": "your head reads the last token (the last patch, x[:, -1]): the class token is at position 0, "
                 "head(norm(x)[:, 0])",
    "first_image": "your head reads x[0], every token of the first image, instead of x[:, 0], the class token of "
                   "every image: head(norm(x)[:, 0]) gives (B, n_classes)",
    "causal_blocks": "your blocks get a causal mask, as in a language model: a ViT's tokens all attend to each "
                     "other (the class token most of all), so call each block without a mask",
    "no_final_norm": "your ViT applies the head without the final norm: head(norm(x)[:, 0])",
    "norm_every_block": "your ViT applies the final norm after every block instead of once after the last: the "
                        "blocks normalise their own inputs, norm comes only before the head",
    "norm_before_blocks": "your ViT applies the final norm before the blocks, to the embeddings: each Pre-LN block "
                          "normalises its own input, and the final norm comes after the last block, just before "
                          "the head, head(norm(x)[:, 0])",
    "patch_mean_pool": "your head reads the mean over the patch tokens, x[:, 1:].mean(dim=1) (global average "
                       "pooling): the contract's ViT reads the class token, head(norm(x)[:, 0])",
    "last_block_skipped": "your ViT skips its last block (self.blocks[:-1], or range(len(self.blocks) - 1)): "
                          "run every block, for block in self.blocks: x = block(x)",
    "first_block_skipped": "your ViT skips its first block (self.blocks[1:]): run every block, for block in "
                           "self.blocks: x = block(x)",
    "blocks_read_embedding": "only your last block reaches the head: each block reads the patch embeddings, "
                             "not the previous block's output; chain them, x = block(x)",
    "block_residual_added": "your ViT adds a residual around each block, x = x + block(x): a TransformerBlock "
                            "already adds its own residuals, so x = block(x)",
    "shared_blocks": "all your blocks compute with the last block's weights: one TransformerBlock repeated "
                     "([block] * n_layers) is one module, so loading each block's weights overwrote the others; "
                     "create a new TransformerBlock for each layer",
}.items()))
VIT_VARIANTS = {m.name: m.sentence for m in VIT_MISTAKES}  # variant -> sentence


# A family: the head reading another token than the class token (the last one is head_last's).
VIT_READS = mistake("vit_classifier", "reads_token",
                    "your head reads token {index}, x[:, {index}]: the class token is prepended at position 0, and "
                    "the head reads it, head(norm(x)[:, 0])", dict())


def vit_mistakes(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int, n_layers: int
                 ) -> Mistakes:
    """For the ViT's logits; also the head reading token 1, 2, 3 or -2 (VIT_READS)."""
    def model(variant: str = "", read: int = 0) -> Tensor:
        return vit(state, images, patch_size=patch_size, n_heads=n_heads, n_layers=n_layers, variant=variant,
                   read=read)
    family = {VIT_READS.text(index=index): (lambda index=index: model(read=index)) for index in (1, 2, 3, -2)}
    return besides(simulated(VIT_MISTAKES, model), family)


CLS_WITHOUT_POSITION = mistake("vit_classifier", "cls_without_position",
                               "with no blocks your logits are head(norm(cls_token)): your class token gets no "
                               "position. Prepend it first, then add pos_emb, whose row 0 is the class token's",
                               dict(variant="no_positions"))


def vit_without_blocks_mistakes(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int
                                ) -> Mistakes:
    """For a ViT of no blocks, where the mistakes that leave the class token without a position look the same."""
    entries = [m for m in VIT_MISTAKES if m.name not in ("pos_before_cls", "pos_before_cls_offset", "no_positions")]
    return unambiguous(simulated([*entries, CLS_WITHOUT_POSITION], lambda variant: vit(
        state, images, patch_size=patch_size, n_heads=n_heads, n_layers=0, variant=variant)))


POS_EMB_PER_PATCH = recognised("vit_classifier", "pos_emb_per_patch",
                               "your pos_emb has {rows} rows, one per patch: the class token gets a position too, so "
                               "it is (1, num_patches + 1, d_model), added after the class token is prepended")
CLS_TOKEN_SHAPE = recognised("vit_classifier", "cls_token_shape",
                             "your cls_token is {shape}: the contract's is (1, 1, d_model), one token of a batch of "
                             "one, expanded to (B, 1, d_model) in forward")
NOT_LEARNED_BUFFER = recognised("vit_classifier", "not_learned_buffer",
                                "your {key} is a buffer (register_buffer): it is saved but never learned; make it an "
                                "nn.Parameter")
NOT_LEARNED_FROZEN = recognised("vit_classifier", "not_learned_frozen",
                                "your {key} is a Parameter with requires_grad=False, so it is never learned: the class "
                                "token and the positions are trained with the rest of the model")
UNUSED = recognised("vit_classifier", "unused",
                    "your {key} never reaches the logits (it is not used in forward, or used detached): {fix}")
MISSING_KEY = recognised("vit_classifier", "missing_key",
                         "your {key} is not in the state dict: a plain tensor attribute is neither saved nor learned; "
                         "make it an nn.Parameter named {key}")
DROPOUT_BY_DEFAULT = recognised("vit_classifier", "dropout_by_default",
                                "your ViT drops values in train mode even with dropout=0.0: pass dropout on to every "
                                "TransformerBlock(d_model, n_heads, d_ff, dropout) (the block's own default is 0.1), "
                                "and add no dropout of your own")
DROPOUT_DEFAULT_NOT_ZERO = recognised("vit_classifier", "dropout_default_not_zero",
                                      "your ViT's dropout does not default to 0.0: ViT(...) drops values in train "
                                      "mode, ViT(..., dropout=0.0) does not; the contract's default is dropout=0.0")
DROPOUT_DEFAULT_VALUE = recognised("vit_classifier", "dropout_default_value",
                                   "your ViT's dropout defaults to {p:g}: ViT(...) builds its blocks with "
                                   "nn.Dropout(p={p:g}), ViT(..., dropout=0.0) drops nothing; the contract's default "
                                   "is dropout=0.0")
DROPOUT_IGNORED = recognised("vit_classifier", "dropout_ignored",
                             "your ViT ignores dropout: with dropout=0.5 two calls in train mode gave the same logits; "
                             "pass it on to every TransformerBlock(d_model, n_heads, d_ff, dropout)")


def vit_shape_diagnosis(key: str, shape: tuple[int, ...], num_patches: int, d_model: int) -> str | None:
    """The diagnosis of a cls_token or pos_emb of the wrong shape."""
    if key == "pos_emb" and shape in ((1, num_patches, d_model), (num_patches, d_model)):
        return POS_EMB_PER_PATCH.text(rows=num_patches)
    if key == "cls_token" and shape in ((1, d_model), (d_model,)):
        return CLS_TOKEN_SHAPE.text(shape=shape)
    return None


def vit_load_diagnosis(message: str, num_patches: int, d_model: int) -> str | None:
    """A diagnosis for a load_state_dict that failed on the shape of cls_token or pos_emb (the message names it)."""
    for key in ("pos_emb", "cls_token"):
        if f"size mismatch for {key}" in message and "current model is torch.Size(" in message:
            shape = message.split(f"size mismatch for {key}", 1)[1].split("current model is torch.Size(", 1)[1]
            try:
                dims = tuple(int(d) for d in shape.split(")", 1)[0].strip("[]").split(",") if d.strip())
            except ValueError:
                return None
            return vit_shape_diagnosis(key, dims, num_patches, d_model)
    return None


def vit_not_learned_diagnosis(key: str, is_buffer: bool) -> str:
    return (NOT_LEARNED_BUFFER if is_buffer else NOT_LEARNED_FROZEN).text(key=key)


def vit_unused_diagnosis(key: str) -> str:
    return UNUSED.text(key=key, fix="prepend the class token to the patches" if key == "cls_token" else
                       "add pos_emb to the tokens once the class token is prepended")


BLOCKS_NOT_REGISTERED = recognised(
    "vit_classifier", "blocks_not_registered",
    "your blocks are not registered with the model: in a plain Python list (or tuple) their parameters are not "
    "the ViT's (no state dict entries, no training, no .to()); hold them in nn.ModuleList([...])")


def vit_missing_key_diagnosis(missing: set[str], present: set[str] | None = None) -> str | None:
    """Why the ViT lacks the parameters `missing`; `present`: those it has (given, the blocks held in a plain
    list are named where every missing one is a block's and none it has is numbered, as a ModuleList's are)."""
    for key in ("pos_emb", "cls_token"):
        if key in missing:
            return MISSING_KEY.text(key=key)
    if present is not None and missing and all(key.startswith("blocks.") for key in missing) and \
            not any(re.search(r"(^|\.)\d+\.", key) for key in present):
        return BLOCKS_NOT_REGISTERED.text()
    return None


def vit_dropout_diagnosis(default: bool, zero_drops: bool = True, rate: Any = None) -> str:
    """Why a ViT's dropout misbehaves: with its default (`default`), where an explicit dropout=0.0 drops values
    too (`zero_drops`) or does not (and the rate its first block's dropout got by default, if read); or a
    dropout of 0.5 that drops nothing."""
    if not default:
        return DROPOUT_IGNORED.text()
    if zero_drops:
        return DROPOUT_BY_DEFAULT.text()
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate != 0:
        return DROPOUT_DEFAULT_VALUE.text(p=rate)
    return DROPOUT_DEFAULT_NOT_ZERO.text()


# --- swin_windows ------------------------------------------------------------------------------------

def _grid(x: Tensor, ws: int) -> Tensor:
    """(B, H, W, C) -> (B, gh, ws, gw, ws, C)."""
    B, H, W, C = x.shape
    return x.reshape(B, H // ws, ws, W // ws, ws, C)


def _permuted(x: Tensor, ws: int, *order: int) -> Tensor:
    return _grid(x, ws).permute(*order).reshape(-1, ws * ws, x.shape[-1])


def _split_as_transposed(x: Tensor, ws: int) -> Tensor:
    B, H, W, C = x.shape
    return x.reshape(B, W // ws, ws, H // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)


PARTITION_MISTAKES = (
    mistake("swin_windows", "partition_column_major",
            "your windows go down the columns of the grid first (column-major): after the view (B, H/ws, ws, W/ws, "
            "ws, C), put the grid row before the grid column, permute(0, 1, 3, 2, 4, 5)",
            lambda x, ws: _permuted(x, ws, 0, 3, 1, 2, 4, 5)),
    mistake("swin_windows", "partition_tokens_column_by_column",
            "the tokens inside each window come column by column: keep the row in the window before the column in the "
            "window, permute(0, 1, 3, 2, 4, 5)", lambda x, ws: _permuted(x, ws, 0, 1, 3, 4, 2, 5)),
    mistake("swin_windows", "partition_transposed",
            "you partitioned the transposed map (windows and the tokens in them both column-major): the grid row "
            "comes before the grid column, the row in a window before its column",
            lambda x, ws: _permuted(x, ws, 0, 3, 1, 4, 2, 5)),
    mistake("swin_windows", "partition_without_permute",
            "you reshaped without permuting, so each 'window' is a strip of consecutive pixels of the rows, not a "
            "ws x ws square: permute the view (B, H/ws, ws, W/ws, ws, C) to (0, 1, 3, 2, 4, 5) before flattening",
            lambda x, ws: x.reshape(-1, ws * ws, x.shape[-1])),
    mistake("swin_windows", "partition_grid_first",
            "your windows are ordered by grid position first and image second: all windows of image 0 come first, "
            "then those of image 1 (keep B as the first dimension)", lambda x, ws: _permuted(x, ws, 1, 3, 0, 2, 4, 5)),
    mistake("swin_windows", "partition_keeps_ws_ws",
            "your windows keep their ws x ws square, (B * nW, ws, ws, C), as timm's window_partition does: the "
            "contract's are flattened, (B * nW, ws * ws, C), reshape(-1, ws * ws, C)",
            lambda x, ws: _permuted(x, ws, 0, 1, 3, 2, 4, 5).reshape(-1, ws, ws, x.shape[-1])),
    mistake("swin_windows", "partition_keeps_batch",
            "your windows keep the batch dimension, (B, nW, ws * ws, C): the windows of every image are one list, "
            "(B * nW, ws * ws, C), reshape(-1, ws * ws, C)",
            lambda x, ws: _permuted(x, ws, 0, 1, 3, 2, 4, 5).reshape(x.shape[0], -1, ws * ws, x.shape[-1])),
    mistake("swin_windows", "partition_as_w_h",
            "you split the map as (B, W/ws, ws, H/ws, ws, C), as if it were (B, W, H, C): the map is (B, H, W, C), "
            "rows first", _split_as_transposed),
)


# Families: the grid view flattened (partition) or permuted back (reverse) in any other order, C staying last.
PARTITION_ORDER = mistake(
    "swin_windows", "partition_order",
    "your window_partition flattens the view (B, H/ws, y, W/ws, x, C) in the order ({names}), permute({order}) "
    "(y, x: a pixel's row and column in its window): the windows are (B, H/ws, W/ws, y, x, C) flattened, "
    "permute(0, 1, 3, 2, 4, 5)", dict())
REVERSE_ORDER = mistake(
    "swin_windows", "reverse_order",
    "your window_reverse permutes the windows' view (B, H/ws, W/ws, y, x, C) to ({names}), permute({order}), "
    "before the reshape to (B, H, W, C): undo window_partition with permute(0, 1, 3, 2, 4, 5), to (B, H/ws, y, "
    "W/ws, x, C)", dict())
PARTITION_AXES = ("B", "H/ws", "y", "W/ws", "x", "C")
REVERSE_AXES = ("B", "H/ws", "W/ws", "y", "x", "C")


@functools.cache
def _window_order_texts(entry_name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    entry, axes, named = {
        "partition": (PARTITION_ORDER, PARTITION_AXES,
                      {(0, 1, 3, 2, 4), (0, 3, 1, 2, 4), (0, 1, 3, 4, 2), (0, 3, 1, 4, 2), (0, 1, 2, 3, 4),
                       (1, 3, 0, 2, 4)}),
        "reverse": (REVERSE_ORDER, REVERSE_AXES, {(0, 1, 3, 2, 4), (0, 1, 4, 2, 3), (0, 1, 2, 3, 4)})}[entry_name]
    return tuple((entry.text(names=", ".join(axes[i] for i in (*order, 5)), order=", ".join(map(str, (*order, 5)))),
                  (*order, 5)) for order in itertools.permutations(range(5)) if order not in named)


def partition_mistakes(x: Tensor, ws: int) -> Mistakes:
    """window_partition(x, ws) as common mistakes compute it, and in every other order (PARTITION_ORDER)."""
    family = {text: (lambda order=order: _permuted(x, ws, *order)) for text, order in _window_order_texts("partition")}
    return unambiguous({**bind(PARTITION_MISTAKES, x, ws), **family})


def _regrouped(windows: Tensor, view: tuple[int, ...], order: tuple[int, ...], shape: tuple[int, int]) -> Tensor:
    return windows.reshape(-1, *view, windows.shape[-1]).permute(*order).reshape(-1, *shape, windows.shape[-1])


REVERSE_MISTAKES = (
    mistake("swin_windows", "reverse_column_major",
            "you put the windows back column-major over the grid (window n at grid column n // (H/ws)): window n is "
            "at grid row n // (W/ws), grid column n % (W/ws)",
            lambda windows, ws, H, W: _regrouped(windows, (W // ws, H // ws, ws, ws), (0, 2, 3, 1, 4, 5), (H, W))),
    mistake("swin_windows", "reverse_tokens_column_by_column",
            "you put each window's tokens back column by column: token t is at row t // ws, column t % ws of its "
            "window",
            lambda windows, ws, H, W: _regrouped(windows, (H // ws, W // ws, ws, ws), (0, 1, 4, 2, 3, 5), (H, W))),
    mistake("swin_windows", "reverse_without_permute",
            "you reshaped the windows straight to (B, H, W, C) without undoing the permutation: view them as (B, "
            "H/ws, W/ws, ws, ws, C) and permute(0, 1, 3, 2, 4, 5) before flattening",
            lambda windows, ws, H, W: windows.reshape(-1, H, W, windows.shape[-1])),
    mistake("swin_windows", "reverse_repeats_partition",
            "you repeated window_partition's view (B, H/ws, ws, W/ws, ws, C) instead of inverting it: the windows "
            "are (B, H/ws, W/ws, ws, ws, C), grid first",
            lambda windows, ws, H, W: _regrouped(windows, (H // ws, ws, W // ws, ws), (0, 1, 3, 2, 4, 5), (H, W))),
    mistake("swin_windows", "reverse_h_w_swapped",
            "you swapped H and W: the windows were put back into a (W, H) map. The map is (B, H, W, C), H/ws rows of "
            "windows",
            lambda windows, ws, H, W: _regrouped(windows, (W // ws, H // ws, ws, ws), (0, 1, 3, 2, 4, 5), (W, H))),
    mistake("swin_windows", "reverse_grid_swapped",
            "you used W/ws rows and H/ws columns of windows (H and W swapped in the view): the grid of windows has "
            "H/ws rows of W/ws windows",
            lambda windows, ws, H, W: _regrouped(windows, (W // ws, H // ws, ws, ws), (0, 1, 3, 2, 4, 5), (H, W))),
)


def reverse_mistakes(windows: Tensor, ws: int, H: int, W: int) -> Mistakes:
    """window_reverse(windows, ws, H, W) as common mistakes compute it, and in every other order (REVERSE_ORDER)."""
    view = (H // ws, W // ws, ws, ws)
    family = {text: (lambda order=order: _regrouped(windows, view, order, (H, W)))
              for text, order in _window_order_texts("reverse")}
    return unambiguous({**bind(REVERSE_MISTAKES, windows, ws, H, W), **family})


def _slice_labels(n: int, cuts: list[int]) -> Tensor:
    """(n,) region numbers: 0 before cuts[0], 1 up to cuts[1], ...; `cuts` may be empty or repeat."""
    i = torch.arange(n)
    return sum(((i >= c).long() for c in cuts), torch.zeros(n, dtype=torch.long))


def _mask_of(labels: Tensor, ws: int, order: tuple[int, ...] | None = (0, 1, 3, 2, 4, 5)) -> Tensor:
    """Bool (nW, N, N) from a (H, W) label map: True where two tokens of a window carry the same label.
    `order` permutes the (1, gh, ws, gw, ws, 1) grid before the windows are flattened (None: no permute)."""
    grid = _grid(labels[None, :, :, None], ws)
    windows = (grid if order is None else grid.permute(*order)).reshape(-1, ws * ws)
    return windows[:, :, None] == windows[:, None, :]


def _region_mask(H: int, W: int, ws: int, row_cuts: list[int], col_cuts: list[int], *, roll: int = 0) -> Tensor:
    labels = _slice_labels(H, row_cuts)[:, None] * 3 + _slice_labels(W, col_cuts)[None, :]
    return _mask_of(torch.roll(labels, (roll, roll), dims=(0, 1)), ws)


def _right_mask(H: int, W: int, ws: int, s: int) -> Tensor:
    """The contract's shifted-window mask, from region labels."""
    return _region_mask(H, W, ws, [H - ws, H - s], [W - ws, W - s])


def _looped_mask(H: int, W: int, ws: int, rows: tuple, cols: tuple) -> Tensor:
    """The mask of Swin's label loops, `for rows in ...: for cols in ...: labels[rows, cols] = count`, over these
    row and column indices as a mistake writes them (what no index reaches keeps label 0)."""
    labels = torch.zeros(H, W, dtype=torch.long)
    for count, (r, c) in enumerate(itertools.product(rows, cols)):
        labels[r, c] = count
    return _mask_of(labels, ws)


def _tuple_first_slice(H: int, W: int, ws: int, s: int, both: bool) -> Tensor:
    """The labels written with `(0, H - ws)` for slice(0, H - ws) (and the same for W when `both`):
    indexing with a tuple picks rows 0 and H - ws, and with two tuples the two pixels (0, 0), (H-ws, W-ws)."""
    return _looped_mask(H, W, ws, ((0, H - ws), slice(H - ws, H - s), slice(H - s, H)),
                        ((0, W - ws) if both else slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)))


def _sliced_with(H: int, W: int, ws: int, s: int, rows_of: int, cols_of: int) -> Tensor:
    """The mask of Swin's loops whose row cuts are those of a side `rows_of` long (and the column cuts of
    `cols_of`): what the code makes where H and W are mixed up."""
    return _looped_mask(H, W, ws, (slice(0, rows_of - ws), slice(rows_of - ws, rows_of - s), slice(rows_of - s, rows_of)),
                        (slice(0, cols_of - ws), slice(cols_of - ws, cols_of - s), slice(cols_of - s, cols_of)))


def _shift_labels(H: int, W: int, ws: int, s: int) -> Tensor:
    """(H, W) region numbers of the rolled map: 3 row slices times 3 column slices."""
    return _slice_labels(H, [H - ws, H - s])[:, None] * 3 + _slice_labels(W, [W - ws, W - s])[None, :]


MASK_FOLLOWS_PARTITION = mistake(
    "swin_windows", "mask_follows_partition",
    "your mask is right for windows in the order your window_partition makes, {order}: fix "
    "window_partition (its own checks say how) and the mask follows",
    lambda H, W, ws, s, order: _mask_of(_shift_labels(H, W, ws, s), ws, order))
SHIFTED_MASK_MISTAKES = (
    mistake("swin_windows", "mask_where_labels_differ",
            "your mask is True where the two labels differ: that is the official code's `!= 0` for the -100 entries; "
            "this mask is True where the tokens may attend, i.e. where the labels are equal",
            lambda H, W, ws, s: ~_right_mask(H, W, ws, s)),
    mistake("swin_windows", "labels_before_roll",
            "your labels are the regions of the map before the roll (the first s rows and columns cut off, in the "
            "first windows): the mask is for the rolled map, whose cuts are at H - s and W - s, in the last windows",
            lambda H, W, ws, s: _region_mask(H, W, ws, [s], [s])),
    mistake("swin_windows", "labels_rolled_forward",
            "you rolled the labels by +s instead of -s (or built them for a map rolled that way): the block rolls "
            "the map by -s, which brings the first s rows and columns to the bottom and the right",
            lambda H, W, ws, s: _region_mask(H, W, ws, [s], [s], roll=s)),
    mistake("swin_windows", "slices_off_by_one",
            "your slices are off by one (a cut at H - s - 1 instead of H - s): the last region, the rows the roll "
            "wrapped round, is [H - s, H), exactly s rows",
            lambda H, W, ws, s: _region_mask(H, W, ws, [H - ws, H - s - 1], [W - ws, W - s - 1])),
    mistake("swin_windows", "regions_rows_only",
            "your regions are cut along the rows only: every one of the 3 x 3 blocks (row slice, column slice) needs "
            "its own label, count them in the inner loop", lambda H, W, ws, s: _region_mask(H, W, ws, [H - ws, H - s], [])),
    mistake("swin_windows", "regions_columns_only",
            "your regions are cut along the columns only: every one of the 3 x 3 blocks (row slice, column slice) "
            "needs its own label", lambda H, W, ws, s: _region_mask(H, W, ws, [], [W - ws, W - s])),
    mistake("swin_windows", "mask_all_true",
            "your mask is all True, as if the map were not rolled: the cut between the last two regions is at H - s "
            "(and W - s), inside the last window, not at H - window_size",
            lambda H, W, ws, s: torch.ones_like(_right_mask(H, W, ws, s))),
    mistake("swin_windows", "shift_half_window",
            "your mask is the one for a shift of window_size // 2 whatever shift_size says: use the shift_size "
            "given",
            lambda H, W, ws, s: _region_mask(H, W, ws, [H - ws, H - ws // 2], [W - ws, W - ws // 2])
            if s != ws // 2 else None),
    mistake("swin_windows", "row_slices_of_w",
            "your row slices are cut with W (slice(0, W - ws), ...): the rows are cut at H - ws and H - s, the "
            "columns at W - ws and W - s (they differ where the map is not square)",
            lambda H, W, ws, s: _sliced_with(H, W, ws, s, W, W) if H != W else None),
    mistake("swin_windows", "column_slices_of_h",
            "your column slices are cut with H (slice(0, H - ws), ...): the columns are cut at W - ws and W - s, the "
            "rows at H - ws and H - s (they differ where the map is not square)",
            lambda H, W, ws, s: _sliced_with(H, W, ws, s, H, H) if H != W else None),
    mistake("swin_windows", "slices_of_h_and_w_swapped",
            "your slices swap H and W (the rows cut at W - ws and W - s, the columns at H - ws and H - s): the rows "
            "are cut with H, the columns with W",
            lambda H, W, ws, s: _sliced_with(H, W, ws, s, W, H) if H != W else None),
    mistake("swin_windows", "first_slice_tuple",
            "your first slice is the tuple (0, H - ws), not slice(0, H - ws): indexing with a tuple picks the two "
            "rows 0 and H - ws instead of the rows between them", lambda H, W, ws, s: _tuple_first_slice(H, W, ws, s, False)),
    mistake("swin_windows", "first_slices_tuples",
            "your first slices are the tuples (0, H - ws) and (0, W - ws), not slice(0, H - ws) and slice(0, W - ws): "
            "indexing with two tuples labels the two pixels (0, 0) and (H - ws, W - ws) only",
            lambda H, W, ws, s: _tuple_first_slice(H, W, ws, s, True)),
)
MASK_DTYPE_MISTAKES = (
    mistake("swin_windows", "float_mask",
            "you returned Swin's float mask (0 and -100, added to the scores): return the bool mask, True where the "
            "tokens may attend, e.g. labels[:, :, None] == labels[:, None, :]",
            lambda H, W, ws, s: torch.zeros(_right_mask(H, W, ws, s).shape).masked_fill(~_right_mask(H, W, ws, s),
                                                                                          -100.0)),
    mistake("swin_windows", "float_comparison",
            "you returned the labels' float comparison: make it bool (True where the labels are equal)",
            lambda H, W, ws, s: _right_mask(H, W, ws, s).float()),
)


WINDOW_ONE_BAD_SIDE = recognised(
    "swin_windows", "one_bad_side_let_through",
    "your check lets a map through when only one of H and W is not a multiple of window_size: reject it when "
    "either is, H % window_size or W % window_size (an and there lets one bad side through)")


def window_checks(H: int, W: int, ws: int) -> dict[Mistake, bool]:
    return one_bad_side(H, W, ws, WINDOW_ONE_BAD_SIDE)


# A family: the check of shift_size's bounds (0 <= shift_size < window_size) written another way, each member with
# the bad shifts it lets through (those of the case that fails: a case that passes rules nothing out, so a missing
# upper bound is named by the shifts it lets through, shift_size == window_size and above).
SHIFT_BOUND_INCLUSIVE = recognised(
    "swin_windows", "shift_bound_inclusive",
    "your check lets shift_size == window_size through (<= for <, or no upper bound at all): the shift lies in "
    "0 .. window_size - 1, 0 <= shift_size < window_size")
SHIFT_UPPER_UNCHECKED = recognised(
    "swin_windows", "shift_upper_unchecked",
    "your check lets a shift_size above window_size through: check both bounds, 0 <= shift_size < window_size")
SHIFT_LOWER_UNCHECKED = recognised(
    "swin_windows", "shift_lower_unchecked",
    "your check lets a negative shift_size through: check both bounds, 0 <= shift_size < window_size")
SHIFT_ABS_BOUND = recognised(
    "swin_windows", "shift_abs_bound",
    "your check bounds abs(shift_size) (or -window_size < shift_size), letting a negative shift through: the shift "
    "lies in 0 .. window_size - 1")
SHIFT_BOUNDS = ((SHIFT_BOUND_INCLUSIVE, lambda ws, s: s == ws), (SHIFT_UPPER_UNCHECKED, lambda ws, s: s > ws),
                (SHIFT_LOWER_UNCHECKED, lambda ws, s: s < 0), (SHIFT_ABS_BOUND, lambda ws, s: -ws < s < 0))


def shift_checks(ws: int, s: int) -> dict[Mistake, bool]:
    """For shifted_window_mask(..., ws, s) with a shift outside 0 .. ws - 1: whether each SHIFT_BOUNDS member lets it
    through."""
    return {entry: lets(ws, s) for entry, lets in SHIFT_BOUNDS}


def shifted_mask_mistakes(H: int, W: int, ws: int, s: int) -> Mistakes:
    """shifted_window_mask(H, W, ws, s) as common mistakes compute it (bool masks)."""
    follows: Mistakes = {}
    for order, words in (((0, 3, 1, 2, 4, 5), "column-major over the grid"),
                         ((0, 1, 3, 4, 2, 5), "tokens column by column"), (None, "strips of rows (no permute)")):
        follows.update(bind([MASK_FOLLOWS_PARTITION], H, W, ws, s, order, order=words))
    return unambiguous({**follows, **bind(SHIFTED_MASK_MISTAKES, H, W, ws, s)})


SWIN_MASK_CACHED = mistake(
    "swin_windows", "mask_cached_without_shift",
    "your shifted_window_mask keeps the mask of an earlier call with the same H, W and window_size and returns it "
    "for another shift_size (a cache whose key leaves out shift_size): build the mask of each call's own shift",
    lambda H, W, ws, earlier: _swin_mask(H, W, ws, earlier))


def _swin_mask(H: int, W: int, ws: int, s: int) -> Tensor:
    """The right mask: tokens of a window of the map rolled by -s may attend where their regions' labels agree."""
    labels = torch.zeros(H, W)
    count = 0
    for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):
        for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):
            labels[rows, cols] = count
            count += 1
    windows = labels.reshape(H // ws, ws, W // ws, ws).permute(0, 2, 1, 3).reshape(-1, ws * ws)
    return windows[:, :, None] == windows[:, None, :]


def mask_asked_again_mistakes(H: int, W: int, ws: int, s: int, earlier: int) -> Mistakes:
    """For shifted_window_mask(H, W, ws, s) asked after the same map and window with shift_size `earlier`."""
    stale = {} if earlier == s else bind([SWIN_MASK_CACHED], H, W, ws, earlier)
    return {**shifted_mask_mistakes(H, W, ws, s), **stale}


MASK_OF_SQUARE_WINDOWS = mistake(
    "swin_windows", "mask_of_square_windows",
    "your mask is (nW, ws, ws, ws): the labels it compares come from a window_partition that keeps each window a "
    "ws x ws square, (nW, ws, ws); window_partition flattens them, (B * nW, ws * ws, C) (its own checks say how), "
    "and the mask follows", lambda H, W, ws: torch.Size(((H // ws) * (W // ws), ws, ws, ws)))


def mask_dtype_mistakes(H: int, W: int, ws: int, s: int) -> Mistakes:
    """The official float mask (0 where the tokens may attend, -100 where not) instead of the bool one; the mask
    of windows left square."""
    return {**bind(MASK_DTYPE_MISTAKES, H, W, ws, s), **bind([MASK_OF_SQUARE_WINDOWS], H, W, ws)}


# --- window_attention --------------------------------------------------------------------------------
# Swin's WindowAttention and SwinBlock in float64 from plain operations (windows by view/permute, the
# shifted-window mask from region labels), with one mistake `variant` switched on.

def swin_relative_index(ws: int, variant: str = "") -> Tensor:
    """(N, N) int64: (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1), or a mistake's version of it."""
    y, x = torch.arange(ws).repeat_interleave(ws), torch.arange(ws).repeat(ws)
    dy, dx = y[:, None] - y[None, :], x[:, None] - x[None, :]
    if variant == "index_transposed":
        dy, dx = -dy, -dx
    elif variant == "index_axes_swapped":
        dy, dx = dx, dy
    offset = 0 if variant == "index_no_offset" else ws - 1
    stride = {"index_stride_ws": ws, "index_stride_2ws_minus_2": 2 * ws - 2, "index_no_stride": 1,
              "index_stride_2ws": 2 * ws}.get(variant, 2 * ws - 1)
    return (dy + offset) * stride + (dx + offset)


def _swin_partition(x: Tensor, ws: int) -> Tensor:
    B, H, W, C = x.shape
    return x.reshape(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)


def _swin_reverse(windows: Tensor, ws: int, H: int, W: int) -> Tensor:
    C = windows.shape[-1]
    return windows.reshape(-1, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)


def swin_region_mask(H: int, W: int, ws: int, s: int) -> Tensor:
    """Bool (nW, N, N): two tokens of a window of the map rolled by -s come from the same region."""
    def region(n: int) -> Tensor:
        i = torch.arange(n)
        return (i >= n - ws).long() + (i >= n - s).long()

    labels = _swin_partition((region(H)[:, None] * 3 + region(W)[None, :]).reshape(1, H, W, 1), ws)[..., 0]
    return labels[:, :, None] == labels[:, None, :]


def swin_attention(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, mask: Tensor | None = None, *,
                   variant: str = "", prefix: str = "") -> Tensor:
    """WindowAttention's output (B_, N, C) in float64: window b uses mask[b % nW]."""
    w = {k[len(prefix):]: v.double() for k, v in state.items() if k.startswith(prefix)}
    B_, N, C = x.shape
    dh = C // n_heads
    qkv = F.linear(x.double(), w["qkv.weight"], w.get("qkv.bias"))
    if variant == "qkv_heads_first":
        q, k, v = qkv.reshape(B_, N, n_heads, 3, dh).permute(3, 0, 2, 1, 4)
    else:
        q, k, v = (t.reshape(B_, N, n_heads, dh).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    if variant == "qk_swapped":
        q, k = k, q
    scores = q @ k.transpose(-2, -1) / math.sqrt(C if variant == "scale_channel" else 1 if variant == "unscaled"
                                                 else dh)
    bias = None
    if variant != "no_bias":
        bias = w["relative_position_bias_table"][swin_relative_index(ws, variant)]  # (N, N, H)
        bias = bias.reshape(n_heads, N, N) if variant == "bias_without_permute" else bias.permute(2, 0, 1)
        if variant != "bias_after_softmax":
            scores = scores + bias
    if mask is not None and variant != "mask_ignored":
        nW = mask.shape[0]
        per = mask.repeat_interleave(B_ // nW, 0) if variant == "mask_interleaved" else mask.repeat(B_ // nW, 1, 1)
        per = per[:, None]
        scores = scores + per.double() if variant == "mask_01" else scores.masked_fill(~per, float("-inf"))
    axis = int(variant.removeprefix("softmax_dim_")) if variant.startswith("softmax_dim_") else -1
    weights = scores.softmax(dim=axis)
    if variant == "bias_after_softmax":
        weights = weights + bias
    out = (weights @ v).transpose(1, 2).reshape(B_, N, C)
    return F.linear(out, w["proj.weight"], w.get("proj.bias"))


Roll = tuple[int, tuple[int, ...]]  # (sign of the shift, the dims rolled): (-1, (1, 2)) is roll(y, (-s, -s), (1, 2))


def swin_block(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int, *, variant: str = "",
               rolls: tuple[Roll, Roll] | None = None, mask_of: tuple[int, int] | None = None) -> Tensor:
    """SwinBlock's output (B, H, W, C) in float64; `rolls` (before the windows, after them) replaces the
    contract's ((-1, (1, 2)), (+1, (1, 2))); `mask_of`: the (H, W) of another map whose mask is used."""
    w = {k: v.double() for k, v in state.items()}
    x = x.double()
    _, H, W, C = x.shape

    def norm(t: Tensor, name: str) -> Tensor:
        return F.layer_norm(t, (C,), w[f"{name}.weight"], w[f"{name}.bias"], eps=1e-5)

    first, back = {"roll_wrong_way": (shift, -shift), "rolled_back_same_way": (-shift, -shift)}.get(
        variant, (-shift, shift))
    y = norm(x, "norm1")
    if rolls is not None:
        (sign, dims), after = rolls
        y = torch.roll(y, (sign * shift,) * len(dims), dims) if dims else y
    elif shift:
        y = torch.roll(y, (first, first), dims=(1, 2))
    mask = swin_region_mask(*(mask_of or (H, W)), ws, shift) if shift and variant != "mask_not_passed" else None
    y = _swin_reverse(swin_attention(w, _swin_partition(y, ws), n_heads, ws, mask, variant=variant, prefix="attn."),
                      ws, H, W)
    if rolls is not None:
        sign, dims = after
        y = torch.roll(y, (sign * shift,) * len(dims), dims) if dims else y
    elif shift and variant != "no_roll_back":
        y = torch.roll(y, (back, back), dims=(1, 2))
    x = y if variant == "attention_residual_dropped" else (
        norm(x, "norm1") if variant == "residual_from_normed" else x) + y
    h = x if variant == "mlp_without_norm2" else norm(x - y if variant == "parallel_mlp" else x, "norm2")
    act = F.relu if variant == "relu" else functools.partial(F.gelu, approximate="tanh") if variant == "gelu_tanh" \
        else F.gelu
    mlp = F.linear(act(F.linear(h, w["mlp.0.weight"], w["mlp.0.bias"])), w["mlp.2.weight"], w["mlp.2.bias"])
    return mlp if variant == "mlp_residual_dropped" else x + mlp


SWIN_INDEX_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "index_transposed": "your relative position index is transposed, (yj - yi + ws - 1) * (2ws - 1) + "
                        "(xj - xi + ws - 1): token i's offset from token j is (yi - yj, xi - xj), query minus key",
    "index_no_offset": "your relative position index lacks the ws - 1 offsets: the offsets yi - yj and xi - xj run "
                       "from -(ws - 1) to ws - 1, so add ws - 1 to each before (yi - yj + ws - 1) * (2ws - 1) + "
                       "(xi - xj + ws - 1) (negative indices wrap around to the end of the table)",
    "index_axes_swapped": "your relative position index puts the column offset first, (xi - xj + ws - 1) * (2ws - 1) + "
                          "(yi - yj + ws - 1): the row offset is the major one, as tokens are ordered row-major",
    "index_stride_ws": "your relative position index multiplies the row offset by ws: the column offset takes 2ws - 1 "
                       "values, so the rows of offsets are 2ws - 1 apart, (yi - yj + ws - 1) * (2ws - 1) + ...",
    "index_stride_2ws_minus_2": "your relative position index multiplies the row offset by 2ws - 2, so that offsets "
                                "collide: the column offset takes 2ws - 1 values (from 0 to 2ws - 2 after the "
                                "shift), so the stride is 2ws - 1",
    "index_no_stride": "your relative position index adds the two offsets without multiplying the row offset by "
                       "2ws - 1, so that different offsets share a bias: (yi - yj + ws - 1) * (2ws - 1) + "
                       "(xi - xj + ws - 1)",
    "index_stride_2ws": "your relative position index multiplies the row offset by 2ws: the column offset takes "
                        "2ws - 1 values, so the stride is 2ws - 1 (with 2ws some indices pass the end of the table)",
}.items()))
SWIN_ATTENTION_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "scale_channel": "your scores are divided by √C, the channel width: each head's are divided by √(C / n_heads), "
                     "the width of one head",
    "bias_without_permute": "your bias table[index] of shape (N, N, n_heads) is reshaped to (n_heads, N, N) without "
                            "moving the heads first: permute(2, 0, 1), so that head h adds table[index[i, j], h]",
    "no_bias": "your scores have no relative position bias: add table[index[i, j], h] to head h's score of i and j",
    "bias_after_softmax": "your relative position bias is added to the weights after the softmax: it belongs to the "
                          "scores, softmax(q kᵀ / √(C / n_heads) + bias), so that it shifts which keys get weight and "
                          "each row of weights still sums to 1",
    "qkv_heads_first": "you read qkv's output as (heads, 3, head width) per token: it is q, k, v one after the other "
                       "(C features each), each split into heads as split_heads does",
    "qk_swapped": "your q and k are swapped (the scores transposed before the bias): qkv's output is q, k, v in "
                  "that order",
    "mask_interleaved": "your window b uses mask[b // (B_ / nW)]: the windows of one image come one after the other, "
                        "so window b uses mask[b % nW] (mask.repeat, not repeat_interleave)",
    "mask_01": "you added the bool mask to the scores as 0 and 1: masked pairs need a very negative score "
               "(-inf, or a float mask of 0 and -100 as Swin's code builds), allowed ones get nothing added",
    "unscaled": "your window attention's scores are not divided by √(C / n_heads), the square root of one head's "
                "width",
    # the softmax over another axis than the keys of the (B_, n_heads, N, N) scores
    "softmax_dim_0": "your window attention's weights are a softmax over dim=0, the windows of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
    "softmax_dim_1": "your window attention's weights are a softmax over dim=1, the heads of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
    "softmax_dim_2": "your window attention's weights are a softmax over dim=2, the queries of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
}.items()))
SWIN_MASK_IGNORED = mistake("window_attention", "mask_ignored",
                            "your WindowAttention ignores its mask: pairs where mask[b % nW] is False get no weight "
                            "(masked_fill with -inf before the softmax)", dict(variant="mask_ignored"))
MLP_RATIO_IGNORED = mistake("window_attention", "mlp_ratio_ignored",
                            "your MLP's hidden width ignores mlp_ratio (4 * dim): it is int(dim * mlp_ratio)",
                            lambda dim, key: torch.Size({"mlp.0.weight": (4 * dim, dim), "mlp.0.bias": (4 * dim,),
                                                         "mlp.2.weight": (dim, 4 * dim), "mlp.2.bias": (dim,)}[key]))
TABLE_SHAPE_MISTAKES_SWIN = (
    mistake("window_attention", "table_per_token",
            "your table has ws * ws rows, one per token: it has one per relative offset, (2ws - 1) ** 2 "
            "(each of the two offsets runs from -(ws - 1) to ws - 1)", lambda ws, n_heads: torch.Size((ws * ws, n_heads))),
    mistake("window_attention", "table_transposed",
            "your table is (n_heads, (2ws - 1) ** 2): the contract's is ((2ws - 1) ** 2, n_heads), as Swin's "
            "checkpoints hold it", lambda ws, n_heads: torch.Size((n_heads, (2 * ws - 1) ** 2))),
)
SWIN_BLOCK_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "mask_not_passed": "your shifted windows attend without the shifted-window mask (SwinBlock passes none, or "
                       "WindowAttention ignores it): with shift_size > 0 pass "
                       "shifted_window_mask(H, W, ws, shift_size)",
    "roll_wrong_way": "your block rolls the wrong way: roll by -shift_size before the windows (what the mask "
                      "describes) and by +shift_size after",
    "no_roll_back": "your block does not roll the attention's output back: torch.roll(y, (shift_size, shift_size), "
                    "(1, 2)) after window_reverse",
    "rolled_back_same_way": "your block rolls the output back the same way it rolled the map, by -shift_size twice: "
                            "undo the roll, torch.roll(y, (shift_size, shift_size), (1, 2)) after window_reverse",
    "residual_from_normed": "your first residual adds the attention to norm1(x): it adds it to x itself, "
                            "x = x + attention(norm1(x))",
    "mlp_without_norm2": "your MLP reads x without norm2: the second branch is x + mlp(norm2(x))",
    "parallel_mlp": "your MLP reads the block's input, mlp(norm2(x)) of the x before the attention was added: the "
                    "branches run one after the other, x = x + attention(...), then x + mlp(norm2(x)) of that x",
    "relu": "your MLP uses ReLU: Swin's MLP is Linear, GELU, Linear (nn.GELU())",
    "gelu_tanh": "your MLP uses GELU's tanh approximation (nn.GELU(approximate='tanh')): Swin's MLP uses the "
                 "exact GELU, nn.GELU()",
    "attention_residual_dropped": "your block has no residual connection around the window attention (x = y): "
                                  "x = x + y, y being the attention's output rolled back",
    "mlp_residual_dropped": "your block returns mlp(norm2(x)) without the residual connection: "
                            "return x + mlp(norm2(x))",
}.items()))


def _swin_index_entries(ws: int) -> list[Mistake]:
    """The index mistakes that can be told apart at this window size (for ws = 2 the strides ws and 2ws - 2 agree)."""
    strides = ("index_stride_ws", "index_stride_2ws_minus_2")
    return [m for m in SWIN_INDEX_MISTAKES if not (ws == 2 and m.name in strides)]


def swin_index_mistakes(ws: int) -> Mistakes:
    return simulated(_swin_index_entries(ws), lambda variant: swin_relative_index(ws, variant))


# What an index transposed gives, where the index is right (its own check passes): the bias moved with the
# query and key axes swapped.
BIAS_TRANSPOSED = mistake("window_attention", "bias_transposed",
                          "your bias is transposed, query and key swapped: table[index] is (N, N, n_heads) with the "
                          "query along dim 0 and the key along dim 1; move the heads first with permute(2, 0, 1), "
                          "not transpose(0, 2)", dict(variant="index_transposed"))


def swin_attention_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int,
                            mask: Tensor | None = None, index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """WindowAttention's known mistakes on these inputs. `index_ok` (asked only when the check fails) says
    whether the student's relative_position_index is right: then a mistake of the index is none of theirs,
    and the same output is the bias moved the wrong way."""
    def attention(variant: str) -> Tensor:
        return swin_attention(state, x, n_heads, ws, mask, variant=variant)

    return {**_index_or_bias(ws, attention, index_ok), **simulated([*SWIN_ATTENTION_MISTAKES, SWIN_MASK_IGNORED],
                                                                   attention)}


def _index_or_bias(ws: int, simulate: Callable[[str], Tensor], index_ok: Callable[[], bool] | None) -> Mistakes:
    """The index's mistakes through `simulate(variant)`; where `index_ok()` says the student's index is right,
    instead the bias moved with query and key swapped (which gives what a transposed index gives)."""
    index = simulated(_swin_index_entries(ws), simulate)
    if index_ok is None:
        return index
    ok = functools.cache(index_ok)
    index = {sentence: (lambda model=model: None if ok() else model()) for sentence, model in index.items()}
    return {**index, BIAS_TRANSPOSED.sentence: lambda: simulate("index_transposed") if ok() else None}


# A family: any direction and axes of either roll (or none), each pair its own sentence.
ROLLS = mistake(
    "window_attention", "rolls",
    "your block rolls the map with {before} before window_partition and with {after} after window_reverse: "
    "the rolls are torch.roll(y, (-shift_size, -shift_size), dims=(1, 2)) before and torch.roll(y, (shift_size, "
    "shift_size), dims=(1, 2)) after", dict())
# dims=(2, 3) is the (B, C, H, W) habit: on (B, H, W, C) it rolls the columns and the channels
ROLLS_BEFORE: tuple[Roll, ...] = ((-1, (1, 2)), (1, (1, 2)), (0, ()), (-1, (1,)), (-1, (2,)), (-1, (2, 3)))
ROLLS_AFTER: tuple[Roll, ...] = ((1, (1, 2)), (-1, (1, 2)), (0, ()), (1, (1,)), (1, (2,)), (1, (2, 3)))
ROLLS_NAMED = {((-1, (1, 2)), (1, (1, 2))), ((1, (1, 2)), (-1, (1, 2))), ((-1, (1, 2)), (-1, (1, 2))),
               ((-1, (1, 2)), (0, ()))}  # right, roll_wrong_way, rolled_back_same_way, no_roll_back


def _roll_words(roll: Roll) -> str:
    """The roll as code: torch.roll(y, (0, 0), dims=(1, 2)) for none."""
    sign, dims = roll
    if not dims:
        return "torch.roll(y, (0, 0), dims=(1, 2))"
    amount = "-shift_size" if sign < 0 else "shift_size"
    if len(dims) == 1:
        return f"torch.roll(y, {amount}, dims={dims[0]})"
    return f"torch.roll(y, ({amount}, {amount}), dims={dims})"


SWIN_BLOCK_MASK_KEPT = mistake(
    "window_attention", "block_mask_kept",
    "your SwinBlock keeps the mask it made on its first call (as Swin's code keeps one for its one input resolution) "
    "and uses it again for a map of another height and width with as many windows: make "
    "shifted_window_mask(H, W, ws, shift) of each call's own H and W",
    lambda state, x, n_heads, ws, shift, first: swin_block(state, x, n_heads, ws, shift, mask_of=first))


def swin_block_again_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                              first: tuple[int, int], got: Any = None,
                              index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """For SwinBlock called again after a first call on a map of size `first` (H, W); `index_ok` as for
    swin_attention_mistakes."""
    stale = {} if not shift or first == tuple(x.shape[1:3]) else \
        bind([SWIN_BLOCK_MASK_KEPT], state, x, n_heads, ws, shift, first)
    return {**swin_block_mistakes(state, x, n_heads, ws, shift, got, index_ok), **stale}


def swin_block_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                        got: Any = None, index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """For SwinBlock (which gave `got`); with a shift, also every other pair of rolls (ROLLS_BEFORE, ROLLS_AFTER);
    `index_ok` as for swin_attention_mistakes."""
    def block(variant: str) -> Tensor:
        return swin_block(state, x, n_heads, ws, shift, variant=variant)

    named = {**_index_or_bias(ws, block, index_ok), **simulated([*SWIN_ATTENTION_MISTAKES, *SWIN_BLOCK_MISTAKES],
                                                                block)}
    family = {ROLLS.text(before=_roll_words(before), after=_roll_words(after)):
              (lambda r=(before, after): swin_block(state, x, n_heads, ws, shift, rolls=r))
              for before in ROLLS_BEFORE for after in ROLLS_AFTER
              if shift and (before, after) not in ROLLS_NAMED}
    return besides(named, family, got)


def swin_rolled_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                         select: Callable[[Tensor], Tensor]) -> Mistakes:
    """For the shifted block on x rolled by +shift, rolled back by -shift and seen through `select`."""
    rolled = torch.roll(x.double(), (shift, shift), dims=(1, 2))
    return simulated([m for m in SWIN_BLOCK_MISTAKES if m.name in ("roll_wrong_way", "no_roll_back",
                                                                   "rolled_back_same_way")],
                     lambda variant: select(torch.roll(swin_block(state, rolled, n_heads, ws, shift, variant=variant),
                                                       (-shift, -shift), (1, 2))))


def swin_block_shape_mistakes(dim: int, mlp_ratio: float, key: str) -> Mistakes:
    if not key.startswith(("mlp.0.", "mlp.2.")) or mlp_ratio == 4.0:
        return {}
    return bind([MLP_RATIO_IGNORED], dim, key)


def swin_table_shape_mistakes(ws: int, n_heads: int) -> Mistakes:
    return bind(TABLE_SHAPE_MISTAKES_SWIN, ws, n_heads)


# === shared: mistakes any component's checks can see ===================================================
# (GENERAL entries: a dtype the result does not keep, torch's own words for a mistake in student code.)

# The result's dtype is not the one the check asks for, its shape being right (compare.diagnose weighs these:
# matched where only the dtype is wrong, ruled out where the values are wrong in the right dtype).
FLOAT_DTYPE_CHANGED = recognised(
    GENERAL, "float_dtype_changed",
    "your result changed dtype on the way: a .float() or .double(), a dtype= argument, or a tensor made "
    "without dtype= (float32 by default) mixed in; compute in the dtype the result must have (the inputs', "
    "x.dtype, where it follows them), or cast back with .to(...)")
NOT_BOOL = recognised(
    GENERAL, "not_bool",
    "your mask is not a bool tensor: make it with dtype=torch.bool, or by a comparison (j <= i); masked_fill "
    "and ~ want bool, and 0/1 numbers (uint8, int, float) are no mask")
NOT_INTEGER = recognised(
    GENERAL, "not_integer",
    "your indices are not integers: keep integer arithmetic (arange without a float dtype, // rather than /), "
    "or convert with .long()")


def dtype_changed(want: torch.dtype, got: torch.dtype | None = None) -> Mistake | None:
    """The entry for a result that should be of dtype `want` and came back in `got` (None: any other dtype
    that entry is about), or None where no entry is about these two."""
    if want == torch.bool:
        return NOT_BOOL
    if want.is_floating_point:
        return FLOAT_DTYPE_CHANGED if got is None or got.is_floating_point else None
    if not want.is_complex:
        return NOT_INTEGER if got is None or got.is_floating_point or got == torch.bool else None
    return None


SQUEEZED = recognised(
    GENERAL, "squeezed",
    "your result lost its axes of size 1 (its shape is the expected one without them): squeeze() without a dim "
    "drops every axis of size 1 (the batch's too when the batch is one), and so does a sum or mean over such an "
    "axis; squeeze only the dim you mean (squeeze(-1)), or keep it (keepdim=True)")


def squeezed(actual: Any, shape: Any) -> tuple[Mistake, bool] | None:
    """SQUEEZED, and whether a tensor `actual` of a wrong shape is the expected `shape` less its axes of size 1;
    None where it cannot tell (no tensor, no shape known, no axis of size 1 in it, the shape right)."""
    if not isinstance(actual, Tensor) or shape is None or None in tuple(shape) or 1 not in tuple(shape) or \
            tuple(actual.shape) == tuple(shape):
        return None
    return SQUEEZED, tuple(actual.shape) == tuple(d for d in shape if d != 1)


# torch's own error messages that name a mistake in the line of student code that raised them.
VIEW_NOT_CONTIGUOUS = recognised(
    GENERAL, "view_not_contiguous",
    "you called .view on a tensor whose memory is not in row order (it was transposed or permuted), and view "
    "cannot regroup it: use .reshape(...), or .contiguous().view(...)")
TENSOR_AS_BOOL = recognised(
    GENERAL, "tensor_as_bool",
    "you used a tensor as a truth value (if t, not t, t or u, and): a tensor of several values has none. Test "
    "`t is None` where you mean 'not set yet' (an empty cache), or reduce it with .any() / .all()")
CAT_NOT_EXPANDED = recognised(
    "vit_classifier", "cat_not_expanded",
    "you concatenated tensors whose other dimensions differ, one of them of size 1 there: torch.cat does not "
    "broadcast, so expand it first (a (1, 1, D) class token to the batch, .expand(B, -1, -1))")
BMM_NOT_3D = recognised(
    GENERAL, "bmm_not_3d",
    "you called torch.bmm, which takes 3-D tensors only, (batch, n, m): use @ (torch.matmul), which batches over "
    "every leading dimension")
RETURN_TYPES_PAIR = recognised(
    GENERAL, "return_types_pair",
    "you used what x.max(dim) (or min, sort, topk, median) returns as a tensor: with a dim it returns a pair "
    "(values, indices); take .values (or [0]), or use x.amax(dim, keepdim=True) / x.amin(...)")
EINSUM_FIXED_RANK = recognised(
    GENERAL, "einsum_fixed_rank",
    "your torch.einsum equation spells out a fixed number of dimensions (such as 'bhid,bhjd->bhij'), and a tensor "
    "came with another number: write the leading dimensions as an ellipsis, '...id,...jd->...ij', so that one "
    "equation serves (T, d), (B, T, d) and (B, H, T, d) alike")
TORCH_ERRORS = (
    ("view size is not compatible with input tensor's size and stride", VIEW_NOT_CONTIGUOUS),
    ("Boolean value of Tensor with more than one value is ambiguous", TENSOR_AS_BOOL),
    ("must be a 3D tensor", BMM_NOT_3D),
    ("'torch.return_types.", RETURN_TYPES_PAIR),
    ("and no ellipsis was given", EINSUM_FIXED_RANK),
)
# torch.cat's words for tensors of other sizes, one of them 1: CAT_NOT_EXPANDED
CAT_OF_SIZE_1 = re.compile(r"Sizes of tensors must match except in dimension \d+\. Expected size (1 but got size \d+"
                           r"|\d+ but got size 1\b)")
# Python's own ValueErrors that no check expects: the student's own check rejecting a valid call, a shape
# unpacked into a fixed number of names.
OWN_CHECK_TOO_STRICT = recognised(
    GENERAL, "own_check_too_strict",
    "your own check raised ValueError on a valid call: its condition rejects inputs the contract accepts (< for "
    "<=, another dimension or size than the contract's)")
SHAPE_UNPACKED = recognised(
    GENERAL, "shape_unpacked",
    "you unpacked a tensor's shape into a fixed number of names (b, t, d = x.shape), but it came with another "
    "number of dimensions: read the sizes you need by index from the end (x.shape[-1], x.size(-2)) so that any "
    "leading dimensions pass")
UNPACKED = re.compile(r"(too many|not enough) values to unpack \(expected \d+")


# What the checks' weights, loaded by the contract's names, tell of an nn.Sequential numbered otherwise.
SEQUENTIAL_SHORT = recognised(
    GENERAL, "sequential_short",
    "your {seq} holds at index {got} the layer that the contract's holds at {want}: a module before it is missing "
    "(the activation between the layers?); nn.Sequential numbers every module it holds, activations and dropout too")
SEQUENTIAL_LONG = recognised(
    GENERAL, "sequential_long",
    "your {seq} holds at index {got} the layer that the contract's holds at {want}: it has a module too many before "
    "it; nn.Sequential numbers every module it holds, activations and dropout too")
UNLOADED = re.compile(r"has no parameters named \[([^\]]*)\] \(its parameters: \[([^\]]*)\]")


def sequential_shifted(message: str) -> str | None:
    """SEQUENTIAL_SHORT's or _LONG's sentence where each weight the student's module lacks (`message`: a WeightsMismatch's
    words) sits one index lower, or higher, in the same nn.Sequential of theirs, and nowhere else differs."""
    found = UNLOADED.search(message)
    if found is None:
        return None
    missing, own = (set(re.findall(r"'([^']+)'", group)) for group in found.groups())
    shifts = set()
    for key in missing:
        parts = re.fullmatch(r"(.+)\.(\d+)\.(weight|bias)", key)
        if parts is None:
            return None
        seq, index, param = parts[1], int(parts[2]), parts[3]
        moved = [d for d in (-1, 1) if f"{seq}.{index + d}.{param}" in own]
        if len(moved) != 1:
            return None
        shifts.add((seq, index, index + moved[0]))
    if len(shifts) != 1:
        return None
    (seq, want, got), = shifts
    return (SEQUENTIAL_SHORT if got < want else SEQUENTIAL_LONG).text(seq=seq, got=got, want=want)


WARMUP_WITHOUT_STEPS = recognised(
    "lr_schedule", "warmup_without_steps",
    "your warmup divides by warmup_steps when it is 0 (step <= warmup_steps holds at step 0, or no test at all): "
    "with no warmup there is nothing to divide; warm up only while step < warmup_steps")


def error_mistake(message: str, where: str = "", kinds: tuple[str, ...] = (), component: str = "",
                  checks_own_inputs: bool = True) -> str | None:
    """The sentence of the mistake that an error raised in student code names, if it names one: torch's words
    for it (TORCH_ERRORS), a ValueError that no check expected (`where`: the student's frames, innermost last;
    `kinds`: the error's classes), or, in the checks of `component`, its own. (A load_state_dict of the wrong
    sizes is named by the state-dict checks, which know the contract's widths: LINEAR_WIDTHS.)

    `checks_own_inputs`: the refused call held only what the check made itself (no tensor that another call of
    student code returned, no cache that student code filled, `Target`'s `made_by_student`). Only such a call
    is known to be valid: a learner's function may rightly refuse what another of its functions produced."""
    entry = next((entry for words, entry in TORCH_ERRORS if words in message), None)
    if entry is not None:
        return entry.sentence
    frames = [line for line in where.splitlines() if line.strip()]
    if component == "vit_classifier" and CAT_OF_SIZE_1.search(message) and frames and "cat(" in frames[-1]:
        return CAT_NOT_EXPANDED.sentence
    if component == "lr_schedule" and "ZeroDivisionError" in kinds and frames and "warmup" in frames[-1]:
        return WARMUP_WITHOUT_STEPS.sentence
    if "ValueError" in kinds and frames:
        if UNPACKED.search(message) and (".shape" in frames[-1] or ".size()" in frames[-1]):
            return SHAPE_UNPACKED.sentence
        if len(frames) == 1 and re.search(r"\braise ValueError\b", frames[0]) and checks_own_inputs:
            return OWN_CHECK_TOO_STRICT.sentence
    return None


# A family: an nn.Linear sized with other widths among those the contract names (d_model, d_k, ...), each pair
# of names its own sentence, known by the weight's shape (out_features, in_features).
LINEAR_WIDTHS = mistake(
    GENERAL, "linear_widths",
    "your {layer} is nn.Linear({got_in}, {got_out}): the contract's is nn.Linear({want_in}, {want_out})", dict())


def linear_width_mistakes(layer: str, want: tuple[str, str], widths: dict[str, int]) -> Mistakes:
    """For the weight of the nn.Linear `layer`, whose (in_features, out_features) the contract names `want`:
    every other pair of the named `widths` (name -> size)."""
    return {LINEAR_WIDTHS.text(layer=layer, got_in=i, got_out=o, want_in=want[0], want_out=want[1]):
            torch.Size((widths[o], widths[i])) for i in widths for o in widths if (i, o) != want}
# --- shared by the LLM track's components (dllm) ---------------------------------------------------------

def biased_layer_mistakes(entry: Mistake, expected: set[str], layers: tuple[str, ...]) -> Mistakes:
    """For a module's set of state-dict keys (`expected`: the right ones, every nn.Linear bias=False): each
    nonempty proper subset of `layers` with a bias too (`entry`'s {layers}: the layers, comma-separated)."""
    subsets = [c for n in range(1, len(layers)) for c in itertools.combinations(layers, n)]
    return {entry.text(layers=", ".join(subset)): (lambda subset=subset: expected | {f"{name}.bias" for name in subset})
            for subset in subsets}


LOADED_SHAPE = re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                          r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")


def loaded_shapes(message: str, expected: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]] | None:
    """The shapes of the student's weights that a failed load_state_dict reveals (`message`: torch's words), the
    others taken as `expected`; None where the message names no size mismatch of these keys."""
    found = {key: tuple(int(d) for d in mine.split(",") if d.strip())
             for key, _, mine in LOADED_SHAPE.findall(message) if key in expected}
    return {**expected, **found} if found else None


LOWER_PRECISION = mistake("layer_norm", "lower_precision",
                          "your {name} computes in float32 for a float64 input (an x.float() kept to the end, or a "
                          "float32 tensor made inside) and returns float32: cast the result back with .type_as(x) "
                          "(computing in float32 and casting back, as LLaMA's code does, is fine), or compute in "
                          "x's dtype", dict())


def lower_precision_mistakes(name: str, compute: Callable[[torch.dtype], Tensor], x: Tensor, got: Any) -> Mistakes:
    """For a float64 case of a computation (`compute(dtype)`: the right result computed in that dtype) that gave
    `got`, not float64: the float32 computation's result. Nothing for other inputs, or a float64 result (a float32
    computation cast back is correct, within the contract's tolerance). A fit: bind it with `besides`, so that a
    mistake modelled exactly speaks where it gives what came back."""
    def model() -> Tensor | None:
        if x.dtype != torch.float64 or not isinstance(got, Tensor) or not got.is_floating_point() or \
                got.dtype == torch.float64:
            return None
        return compute(torch.float32).detach()
    return {LOWER_PRECISION.text(name=name): model}


DEFAULT_DIFFERS = mistake("sampling", "default_differs",
                          "your {function} does not default to the contract's {defaults}: called with them spelled out "
                          "it gives the right result, called without them it does not; give its keyword arguments "
                          "the contract's defaults", dict())


def default_mistakes(function: str, defaults: dict[str, Any], spelled: Any, want: Any, got: Any) -> Mistakes:
    """For a call that relied on `function`'s defaults and gave `got`: a default that differs from the contract's
    explains it where the same call with the contract's `defaults` spelled out gave `spelled`, the right result
    `want`. The model is then the call as made (`got`); elsewhere it is `want`, which rules it out."""
    text = DEFAULT_DIFFERS.text(function=function, defaults=", ".join(f"{k}={v!r}" for k, v in defaults.items()))
    right = isinstance(spelled, Tensor) and isinstance(want, Tensor) and spelled.shape == want.shape and \
        bool((spelled == want).all())
    return {text: got if right else want}


def fitted_besides(models: Mistakes, fitted: Mistakes, got: Any) -> Mistakes:
    """The `fitted` members (models fitted to what came back, `got`), each silent where one of `models`, as
    computed, gives what came back too: a fit never speaks over a mistake modelled exactly (even one that its own
    family leaves unnamed)."""
    both = besides(models, fitted, got)
    return {sentence: both[sentence] for sentence in fitted}


def broadcast_clash(a: tuple[int, ...], b: tuple[int, ...]) -> set[int] | None:
    """The two sizes torch names when shapes `a` and `b` do not broadcast (it compares from the last dim), or None."""
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and 1 not in (x, y):
            return {x, y}
    return None


def keepdim_lost(message: str, shape: tuple[int, ...], dim: int = -1) -> bool:
    """Whether an error's words (`message`) are those of a reduction of a `shape` tensor over `dim` without
    keepdim=True, broadcast back against the tensor."""
    dim %= len(shape)
    clash = broadcast_clash(tuple(shape[:dim]) + tuple(shape[dim + 1:]), tuple(shape))
    return clash is not None and mismatched_sizes(message) == clash

