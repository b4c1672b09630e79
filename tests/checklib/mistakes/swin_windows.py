"""The known mistakes of `swin_windows` (Swin's (shifted) windows): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import itertools

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised
from .general import one_bad_side, unambiguous


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
