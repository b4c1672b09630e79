"""The known mistakes of `head_splitting` (Splitting and merging heads): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import itertools
from typing import Any

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake
from .general import besides


def heads(x: Tensor, n_heads: int) -> Tensor:
    """split_heads done right, (B, T, D) to (B, H, T, Dh): the simulators of kv_cache and grouped-query attention
    split with it too."""
    batch, length, d_model = x.shape
    return x.reshape(batch, length, n_heads, d_model // n_heads).transpose(1, 2)


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
