from . import Bug

BUGS = [
    # merge_heads rightly refuses what the wrong split_heads returns: its ValueError is no "own check too strict".
    Bug("head_splitting", "split_heads_batch_times_heads", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)\n\n\ndef merge_heads(x: Tensor) -> Tensor:\n'
        '    """(B, H, T, Dh) -> (B, T, H * Dh), the inverse of split_heads."""\n',
        'return rearrange(x, "b t (h d) -> (b h) t d", h=n_heads)\n\n\ndef merge_heads(x: Tensor) -> Tensor:\n'
        '    """(B, H, T, Dh) -> (B, T, H * Dh), the inverse of split_heads."""\n'
        '    if x.dim() != 4:\n'
        '        raise ValueError(f"merge_heads expects (B, H, T, Dh), got {tuple(x.shape)}")\n',
        "folds the heads into the batch, (B*H, T, Dh), as some libraries do, while merge_heads checks for the "
        "contract's four dimensions",
        diagnosis=("head_splitting:heads_folded_into_batch",)),
    Bug("head_splitting", "split_without_transpose", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'b, t, d = x.shape\n    return x.reshape(b, n_heads, t, d // n_heads)',
        "views (B, T, D) straight as (B, H, T, Dh) without swapping T and H",
        diagnosis=("head_splitting:split_by_view",)),
    Bug("head_splitting", "split_heads_interleaved", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'return rearrange(x, "b t (d h) -> b h t d", h=n_heads)',
        "gives head h every H-th feature instead of a contiguous slice",
        diagnosis=("head_splitting:interleaved_heads",)),
    Bug("head_splitting", "merge_without_transpose", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        'b, h, t, d = x.shape\n    return x.reshape(b, t, h * d)',
        "merges heads by a reshape without swapping H and T back",
        diagnosis=("head_splitting:merged_by_view",)),
    Bug("head_splitting", "no_divisibility_check", "attention.py",
        '    if x.size(-1) % n_heads != 0:\n        raise ValueError(f"d_model={x.size(-1)} is not divisible by n_heads={n_heads}")\n',
        '',
        "forgets to reject a d_model that the heads cannot share equally",
        named_by="expected a ValueError"),
    Bug("head_splitting", "merge_interleaved", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        'return rearrange(x, "b h t d -> b t (d h)")',
        "joins the heads feature by feature instead of head after head",
        diagnosis=("head_splitting:merged_feature_by_feature",)),
]

BUGS += [
    Bug("head_splitting", "resizes_input_in_place", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'b, t, d = x.shape\n    x.resize_(b, t, n_heads, d // n_heads)\n    return x.transpose(1, 2)',
        "reshapes the caller's tensor in place with resize_ to avoid a copy",
        diagnosis=("head_splitting:resized_input",)),
]

# Two more from common hand-written attention code: the transpose forgotten after the right view, and a merge
# that swaps H and T back but never joins the heads.
BUGS += [
    Bug("head_splitting", "split_forgets_transpose", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'b, t, d = x.shape\n    return x.view(b, t, n_heads, d // n_heads)',
        "views D as (H, Dh) but returns (B, T, H, Dh), without transpose(1, 2)",
        diagnosis=("head_splitting:split_not_transposed",)),
    Bug("head_splitting", "merge_never_joins", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        'return x.transpose(1, 2)',
        "swaps H and T back but returns (B, T, H, Dh) without joining the heads",
        diagnosis=("head_splitting:merge_not_joined",)),
]

BUGS += [
    Bug("head_splitting", "head_count_as_width", "attention.py",
        'rearrange(x, "b t (h d) -> b h t d", h=n_heads)', 'rearrange(x, "b t (h d) -> b h t d", d=n_heads)',
        "gives einops the head count as the head width (d=n_heads instead of h=n_heads)",
        diagnosis=("head_splitting:head_count_as_width",)),
]

# Members of the fitted layout families (mistakes.SPLIT_LAYOUT, MERGE_LAYOUT) that no single entry names.
BUGS += [
    Bug("head_splitting", "split_puts_time_last", "attention.py",
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'return rearrange(x, "b t (h d) -> b h d t", h=n_heads)',
        "returns (B, H, Dh, T), the layout of kᵀ, instead of (B, H, T, Dh)",
        diagnosis=("head_splitting:split_layout",)),
    Bug("head_splitting", "merge_swaps_heads_and_width", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        'b, h, t, d = x.shape\n    return x.transpose(1, 3).reshape(b, t, h * d)',
        "swaps the wrong pair of axes, H and Dh, before the reshape",
        diagnosis=("head_splitting:merge_layout",)),
]

# torch's own error that names the mistake (mistakes.general.VIEW_NOT_CONTIGUOUS).
VIEW = ("general:view_not_contiguous",)
BUGS += [
    Bug("head_splitting", "merge_view_after_transpose", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        "return x.transpose(1, 2).view(x.size(0), x.size(2), -1)",
        "merge_heads calls view on the transposed (non-contiguous) tensor: RuntimeError, needs reshape/contiguous",
        diagnosis=VIEW),
    Bug("head_splitting", "merge_view_after_permute", "attention.py",
        'return rearrange(x, "b h t d -> b t (h d)")',
        "b, h, t, d = x.shape\n    return x.permute(0, 2, 1, 3).view(b, t, h * d)",
        "merge_heads permutes, then views the permuted tensor",
        diagnosis=VIEW),
]

# merge_heads reducing the heads, or joining them along the positions (shape and values).
BUGS += [
    Bug("head_splitting", "merge_sums_heads", "attention.py", 'return rearrange(x, "b h t d -> b t (h d)")',
        "return x.sum(dim=1)", "sums the heads instead of joining them",
        diagnosis=("head_splitting:merge_reduces_heads",)),
    Bug("head_splitting", "merge_cat_along_time", "attention.py", 'return rearrange(x, "b h t d -> b t (h d)")',
        "return torch.cat(x.unbind(1), dim=1)", "concatenates the heads along dim 1, the positions",
        diagnosis=("head_splitting:merge_along_time",)),
    Bug("head_splitting", "split_checks_the_length", "attention.py", "if x.size(-1) % n_heads != 0:",
        "if x.size(1) % n_heads != 0:", "checks the sequence length against n_heads instead of d_model",
        diagnosis=("general:own_check_too_strict",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('head_splitting', 'split_size_heads', 'attention.py',
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'return torch.stack(x.split(n_heads, dim=-1), dim=1)',
        "x.split(n_heads, dim=-1) takes chunks of n_heads features (split's size is the chunk's width)",
        diagnosis=("head_splitting:head_count_as_width",)),
    Bug('head_splitting', 'split_transpose_1_3', 'attention.py',
        'return rearrange(x, "b t (h d) -> b h t d", h=n_heads)',
        'B, T, D = x.shape\n    return x.view(B, T, n_heads, D // n_heads).transpose(1, 3)',
        'views (B, T, H, Dh) and transposes dims 1 and 3',
        diagnosis=("head_splitting:split_layout",)),
]
