from . import Bug

PERMUTE = "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)"
REVERSE_VIEW = "x = windows.view(-1, H // ws, W // ws, ws, ws, C)  # (B, gh, gw, ws, ws, C)"
REVERSE = f"""    {REVERSE_VIEW}
    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)"""
ROWS = "for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):"
COLS = "for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):"
LOOP = f"""    {ROWS}
        {COLS}
            labels[:, rows, cols, :] = count
            count += 1"""
COMPARE = "return windows[:, :, None] == windows[:, None, :]"

BUGS = [
    # window_partition
    Bug("swin_windows", "grid_column_major", "swin.py", PERMUTE,
        "return x.permute(0, 3, 1, 2, 4, 5).reshape(-1, ws * ws, C)",
        "permutes the grid column before the grid row, so the windows go down the columns of the grid",
        diagnosis=("swin_windows:mask_follows_partition", "swin_windows:partition_column_major")),
    Bug("swin_windows", "tokens_column_major", "swin.py", PERMUTE,
        "return x.permute(0, 1, 3, 4, 2, 5).reshape(-1, ws * ws, C)",
        "puts the column inside the window before the row, so each window's tokens come column by column",
        diagnosis=("swin_windows:partition_tokens_column_by_column", "swin_windows:mask_follows_partition")),
    Bug("swin_windows", "view_without_permute", "swin.py", PERMUTE,
        "return x.reshape(-1, ws * ws, C)",
        "reshapes the (B, H/ws, ws, W/ws, ws, C) view straight to windows, so each window is a strip of rows",
        diagnosis=("swin_windows:partition_without_permute", "swin_windows:mask_follows_partition")),
    # window_reverse
    Bug("swin_windows", "reverse_grid_column_major", "swin.py", REVERSE,
        "    x = windows.view(-1, W // ws, H // ws, ws, ws, C)\n"
        "    return x.permute(0, 2, 3, 1, 4, 5).reshape(-1, H, W, C)",
        "puts the windows back column-major over the grid, window n at grid column n // (H/ws)",
        diagnosis=("swin_windows:reverse_column_major",)),
    Bug("swin_windows", "reverse_repeats_partition_view", "swin.py", REVERSE_VIEW,
        "x = windows.view(-1, H // ws, ws, W // ws, ws, C)",
        "reverses by repeating window_partition's view and permute instead of inverting them",
        diagnosis=("swin_windows:reverse_repeats_partition",)),
    Bug("swin_windows", "reverse_h_w_swapped", "swin.py", REVERSE,
        "    x = windows.view(-1, W // ws, H // ws, ws, ws, C)\n"
        "    return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, W, H, C)",
        "takes the arguments as (W, H): right on square maps only, a (B, W, H, C) map otherwise",
        diagnosis=("swin_windows:reverse_h_w_swapped",)),
    # shifted_window_mask
    Bug("swin_windows", "mask_inverted", "swin.py", COMPARE,
        "return windows[:, :, None] - windows[:, None, :] != 0",
        "keeps the official code's `attn_mask != 0` (where the -100 goes) as the mask, True where tokens may not "
        "attend",
        diagnosis=("swin_windows:mask_where_labels_differ",)),
    Bug("swin_windows", "official_float_mask", "swin.py", COMPARE,
        "diff = windows[:, None, :] - windows[:, :, None]\n"
        "    return diff.masked_fill(diff != 0, -100.0).masked_fill(diff == 0, 0.0)",
        "returns the official code's float attn_mask of 0 and -100 instead of the bool mask",
        diagnosis=("swin_windows:float_mask",)),
    Bug("swin_windows", "labels_of_the_unrolled_map", "swin.py", LOOP,
        "    for rows in (slice(0, s), slice(s, H)):\n"
        "        for cols in (slice(0, s), slice(s, W)):\n"
        "            labels[:, rows, cols, :] = count\n"
        "            count += 1",
        "labels the regions of the map before the roll (its first s rows and columns) and never rolls the labels",
        diagnosis=("swin_windows:labels_before_roll",)),
    Bug("swin_windows", "labels_rolled_the_wrong_way", "swin.py", LOOP,
        "    for rows in (slice(0, s), slice(s, H)):\n"
        "        for cols in (slice(0, s), slice(s, W)):\n"
        "            labels[:, rows, cols, :] = count\n"
        "            count += 1\n"
        "    labels = torch.roll(labels, (s, s), dims=(1, 2))",
        "labels the regions of the unrolled map, then rolls the labels by +s instead of the block's -s",
        diagnosis=("swin_windows:labels_rolled_forward",)),
    Bug("swin_windows", "slices_off_by_one", "swin.py", LOOP,
        "    for rows in (slice(0, H - ws), slice(H - ws, H - s - 1), slice(H - s - 1, H)):\n"
        "        for cols in (slice(0, W - ws), slice(W - ws, W - s - 1), slice(W - s - 1, W)):\n"
        "            labels[:, rows, cols, :] = count\n"
        "            count += 1",
        "cuts the last region at H - s - 1 (the last index before it) instead of H - s",
        diagnosis=("swin_windows:slices_off_by_one",)),
    Bug("swin_windows", "labels_counted_by_rows_only", "swin.py", LOOP,
        f"    {ROWS}\n        {COLS}\n            labels[:, rows, cols, :] = count\n        count += 1",
        "increments the label in the outer loop, so the regions are cut along the rows only",
        diagnosis=("swin_windows:regions_rows_only",)),
    Bug("swin_windows", "slices_with_ws_for_s", "swin.py", LOOP,
        "    for rows in (slice(0, H - ws), slice(H - ws, H - ws), slice(H - ws, H)):\n"
        "        for cols in (slice(0, W - ws), slice(W - ws, W - ws), slice(W - ws, W)):\n"
        "            labels[:, rows, cols, :] = count\n"
        "            count += 1",
        "writes window_size where the slices need shift_size, so no window is ever cut (an all-True mask)",
        diagnosis=("swin_windows:mask_all_true",)),
    Bug("swin_windows", "shift_fixed_at_half_the_window", "swin.py",
        "labels = torch.zeros(1, H, W, 1, device=device)",
        "labels = torch.zeros(1, H, W, 1, device=device)\n    s = ws // 2  # Swin's shift",
        "uses Swin's usual shift window_size // 2 whatever shift_size is",
        diagnosis=("swin_windows:shift_half_window",)),
    Bug("swin_windows", "first_slice_a_tuple", "swin.py", ROWS,
        "for rows in ((0, H - ws), slice(H - ws, H - s), slice(H - s, H)):",
        "writes the first row slice as the tuple (0, H - ws), which indexes rows 0 and H - ws only "
        "(tph-yolov5 issue 28)",
        diagnosis=("swin_windows:first_slice_tuple",)),
]

# Members of the fitted order families (mistakes.PARTITION_ORDER, REVERSE_ORDER) that no single entry names.
BUGS += [
    Bug("swin_windows", "partition_strided_windows", "swin.py", PERMUTE,
        "return x.permute(0, 2, 4, 1, 3, 5).reshape(-1, ws * ws, C)",
        "puts the in-window axes first, so each 'window' gathers pixels ws apart all over the map",
        diagnosis=("swin_windows:partition_order",)),
    Bug("swin_windows", "reverse_columns_before_rows", "swin.py", "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)",
        "return x.permute(0, 1, 3, 4, 2, 5).reshape(-1, H, W, C)",
        "moves the grid column after the pixel's row and column when it puts the windows back",
        diagnosis=("swin_windows:reverse_order",)),
]

# torch's own error that names the mistake (mistakes.general.VIEW_NOT_CONTIGUOUS).
BUGS += [
    Bug("swin_windows", "partition_view_after_permute", "swin.py",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)",
        "return x.permute(0, 1, 3, 2, 4, 5).view(-1, ws * ws, C)",
        "window_partition views the permuted grid instead of reshaping it",
        diagnosis=("general:view_not_contiguous",)),
    Bug("swin_windows", "reverse_view_after_permute", "swin.py",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)",
        "return x.permute(0, 1, 3, 2, 4, 5).view(-1, H, W, C)",
        "window_reverse views the permuted windows instead of reshaping them",
        diagnosis=("general:view_not_contiguous",)),
]

# timm's window layout, and the mask built from it (PARTITION_MISTAKES, MASK_OF_SQUARE_WINDOWS).
BUGS += [
    Bug("swin_windows", "partition_keeps_ws_ws", "swin.py",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws, ws, C)",
        "timm's layout: window_partition returns (B * nW, ws, ws, C) instead of (B * nW, ws * ws, C)",
        diagnosis=("swin_windows:partition_keeps_ws_ws", "swin_windows:mask_of_square_windows")),
]
# A divisibility check that lets one bad side through (mistakes.WINDOW_ONE_BAD_SIDE).
BUGS += [
    Bug("swin_windows", "check_and_not_or", "swin.py",
        "    if H % ws or W % ws:\n        raise ValueError(f\"H={H} and W={W} must be multiples of window_size={ws}\")\n"
        "    x = x.view(",
        "    if H % ws and W % ws:\n        raise ValueError(f\"H={H} and W={W} must be multiples of window_size={ws}\")\n"
        "    x = x.view(",
        "window_partition's check uses and: a map with one side indivisible passes",
        diagnosis=("swin_windows:one_bad_side_let_through",)),
    Bug("swin_windows", "partition_checks_token_count", "swin.py",
        "    if H % ws or W % ws:\n        raise ValueError(f\"H={H} and W={W} must be multiples of window_size={ws}\")\n"
        "    x = x.view(",
        "    if (H * W) % (ws * ws):\n        raise ValueError(f\"H={H} and W={W} must be multiples of window_size={ws}\")\n"
        "    x = x.view(",
        "window_partition checks that the token count divides into windows, not each side",
        diagnosis=("swin_windows:one_bad_side_let_through",)),
]

# The windows' dtype changed (mistakes.general.FLOAT_DTYPE_CHANGED), the batch kept as a dimension of its own.
BUGS += [
    Bug("swin_windows", "partition_upcasts", "swin.py",
        "x = x.view(B, H // ws, ws, W // ws, ws, C)  # (B, gh, ws, gw, ws, C)",
        "x = x.float().view(B, H // ws, ws, W // ws, ws, C)", "converts the map to float32 before partitioning",
        diagnosis=("general:float_dtype_changed",)),
    Bug("swin_windows", "partition_keeps_batch", "swin.py",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)",
        "return x.permute(0, 1, 3, 2, 4, 5).reshape(B, -1, ws * ws, C)",
        "keeps (B, nW, ws * ws, C) instead of flattening the batch with the windows",
        diagnosis=("swin_windows:partition_keeps_batch",)),
    Bug("swin_windows", "row_slices_of_w", "swin.py",
        "for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):",
        "for rows in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):",
        "copies the column loop's slices into the row loop (W for H), right on square maps only",
        diagnosis=("swin_windows:row_slices_of_w",)),
    Bug("swin_windows", "column_slices_of_h", "swin.py",
        "for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):",
        "for cols in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):",
        "copies the row loop's slices into the column loop (H for W)",
        diagnosis=("swin_windows:column_slices_of_h",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('swin_windows', 'shift_zero_rejected', 'swin.py',
        'if not 0 <= s < ws or',
        'if not 0 < s < ws or',
        'rejects shift_size == 0 (0 < s for 0 <= s)',
        diagnosis=("general:own_check_too_strict",)),
    Bug('swin_windows', 'slices_s_ws_swapped', 'swin.py',
        'for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):',
        'for rows in (slice(0, H - s), slice(H - s, H - ws), slice(H - ws, H)):',
        'swaps s and ws in the row slices',
        diagnosis=("swin_windows:regions_columns_only",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('swin_windows', 'shift_ws_allowed', 'swin.py',
        'if not 0 <= s < ws or',
        'if not 0 <= s <= ws or',
        'checks shift_size <= window_size instead of <',
        diagnosis=("swin_windows:shift_bound_inclusive",)),
    Bug('swin_windows', 'shift_lower_unchecked', 'swin.py',
        'if not 0 <= s < ws or',
        'if not s < ws or',
        'checks only shift_size < window_size, not the lower bound',
        diagnosis=("swin_windows:shift_lower_unchecked",)),
    Bug("swin_windows", "mask_cached_without_shift", "swin.py",
        '    ws, s = window_size, shift_size\n    if not 0 <= s < ws or H % ws or W % ws:\n        raise ValueError(f"need 0 <= shift_size < window_size and H, W multiples of it; got {H}, {W}, {ws}, {s}")\n    labels = torch.zeros(1, H, W, 1, device=device)\n    count = 0\n    for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):\n        for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):\n            labels[:, rows, cols, :] = count\n            count += 1\n    windows = window_partition(labels, ws).squeeze(-1)  # (nW, N)\n    return windows[:, :, None] == windows[:, None, :]\n',
        '    ws, s = window_size, shift_size\n    masks = shifted_window_mask.__dict__.setdefault("masks", {})  # computed once per map and window size\n    if (H, W, ws) in masks:\n        return masks[H, W, ws]\n    if not 0 <= s < ws or H % ws or W % ws:\n        raise ValueError(f"need 0 <= shift_size < window_size and H, W multiples of it; got {H}, {W}, {ws}, {s}")\n    labels = torch.zeros(1, H, W, 1, device=device)\n    count = 0\n    for rows in (slice(0, H - ws), slice(H - ws, H - s), slice(H - s, H)):\n        for cols in (slice(0, W - ws), slice(W - ws, W - s), slice(W - s, W)):\n            labels[:, rows, cols, :] = count\n            count += 1\n    windows = window_partition(labels, ws).squeeze(-1)  # (nW, N)\n    masks[H, W, ws] = windows[:, :, None] == windows[:, None, :]\n    return masks[H, W, ws]\n',
        "caches the masks under (H, W, window_size), leaving shift_size out of the key",
        diagnosis=("swin_windows:mask_cached_without_shift",)),
]
