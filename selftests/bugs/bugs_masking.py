from . import Bug

TRIL = "return ones.tril(diagonal=k_len - q_len)"
FILL = 'return scores.masked_fill(~mask, float("-inf"))'

BUGS = [
    Bug("masking", "inverted_mask", "attention.py", FILL,
        'return scores.masked_fill(mask, float("-inf"))',
        "masks the positions where the mask is True (allowed) instead of where it is False",
        diagnosis=("masking:masked_where_allowed",)),
    Bug("masking", "diagonal_excluded", "attention.py", TRIL,
        "return ones.tril(diagonal=k_len - q_len - 1)",
        "off by one: a query may not attend its own position",
        diagnosis=("masking:diagonal_excluded",)),
    Bug("masking", "ignores_k_len_offset", "attention.py", TRIL,
        "return ones.tril()",
        "keeps the diagonal at 0 when k_len > q_len, as if the queries were the first positions",
        diagnosis=("masking:offset_ignored",)),
    Bug("masking", "triu_instead_of_tril", "attention.py", TRIL,
        "return ones.triu(diagonal=k_len - q_len)",
        "keeps the upper triangle, so queries attend the future",
        diagnosis=("masking:upper_triangle",)),
    Bug("masking", "fill_with_zero", "attention.py", FILL,
        "return scores.masked_fill(~mask, 0.0)",
        "masks with 0, which softmax still gives weight",
        diagnosis=("masking:filled_with_zero",)),
    Bug("masking", "fill_with_minus_1e4", "attention.py", FILL,
        "return scores.masked_fill(~mask, -1e4)",
        "masks with a constant that is not low enough when real scores are very negative",
        diagnosis=("masking:fill_not_low_enough",)),
    Bug("masking", "masked_fill_in_place", "attention.py", FILL,
        'return scores.masked_fill_(~mask, float("-inf"))',
        "uses masked_fill_, which modifies the caller's scores in place",
        diagnosis=("masking:filled_in_place",)),
    Bug("masking", "mask_none_crashes", "attention.py",
        "    if mask is None:\n        return scores\n    return scores.masked_fill",
        "    return scores.masked_fill",
        "forgets that mask may be None",
        diagnosis=("masking:mask_none_fails",)),
    Bug("masking", "no_k_len_check", "attention.py",
        '    if k_len < q_len:\n        raise ValueError(f"k_len={k_len} must be at least q_len={q_len}")\n',
        "",
        "does not reject fewer keys than queries",
        named_by="expected a ValueError"),
    Bug("masking", "device_ignored", "attention.py",
        "ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)",
        "ones = torch.ones(q_len, k_len, dtype=torch.bool)",
        "always builds the mask on the CPU",
        named_by="expected a tensor on device cpu"),
    Bug("masking", "float_mask", "attention.py",
        "ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)",
        "ones = torch.ones(q_len, k_len, device=device)",
        "returns a float mask of ones and zeros instead of a bool mask",
        diagnosis=("general:not_bool",)),
]

BUGS += [
    Bug("masking", "library_causal_mask", "attention.py",
        "    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)\n    return ones.tril(diagonal=k_len - q_len)\n",
        "    if q_len == k_len:\n"
        "        return torch.nn.Transformer.generate_square_subsequent_mask(q_len, device=device) == 0\n"
        "    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)\n    return ones.tril(diagonal=k_len - q_len)\n",
        "builds the square causal mask with torch.nn.Transformer.generate_square_subsequent_mask instead of by hand",
        named_by="must be written from scratch"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("masking", "offset_sign_flipped", "attention.py", "return ones.tril(diagonal=k_len - q_len)",
        "return ones.tril(diagonal=q_len - k_len)",
        "shifts the diagonal by q_len - k_len, the wrong way",
        diagnosis=("masking:offset_reversed",)),
]

# Members of the fitted diagonal families (mistakes.DIAGONAL_SHIFTED, DIAGONAL_FIXED) that no single entry names.
BUGS += [
    Bug("masking", "diagonal_one_too_far", "attention.py", "return ones.tril(diagonal=k_len - q_len)",
        "return ones.tril(diagonal=k_len - q_len + 1)",
        "off by one the other way: each query also sees the next position",
        diagnosis=("masking:diagonal_late",)),
    Bug("masking", "diagonal_fixed_at_one", "attention.py", "return ones.tril(diagonal=k_len - q_len)",
        "return ones.tril(diagonal=1)",
        "writes a fixed diagonal of 1",
        diagnosis=("masking:diagonal_fixed", "masking:diagonal_late")),
]
BUGS += [
    Bug("masking", "tril_forgotten", "attention.py", "return ones.tril(diagonal=k_len - q_len)", "return ones",
        "builds the ones but forgets to keep their lower triangle",
        diagnosis=("masking:all_true",)),
]

# A mask that is not bool, a masked score that loses the scores' dtype (mistakes.general.NOT_BOOL, FLOAT_DTYPE_CHANGED).
NOT_BOOL = ("general:not_bool",)
BUGS += [
    Bug("masking", "uint8_mask", "attention.py",
        "ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)",
        "ones = torch.ones(q_len, k_len, dtype=torch.uint8, device=device)",
        "old-PyTorch habit: the causal mask is uint8 instead of bool",
        diagnosis=NOT_BOOL),
    Bug("masking", "long_mask_from_comparison", "attention.py",
        "    ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)\n    return ones.tril(diagonal=k_len - q_len)\n",
        "    i = torch.arange(q_len, device=device)[:, None]\n    j = torch.arange(k_len, device=device)[None, :]\n"
        "    return (j <= i + (k_len - q_len)).long()\n",
        "builds the mask from a comparison, then turns it into 0/1 integers",
        diagnosis=NOT_BOOL),
    Bug("masking", "apply_mask_upcasts", "attention.py", 'return scores.masked_fill(~mask, float("-inf"))',
        'return scores.float().masked_fill(~mask, float("-inf"))',
        "fills the masked scores of a float32 copy, so float64 scores lose their dtype",
        diagnosis=("general:float_dtype_changed",)),
]

# The student's own check rejecting a valid call (mistakes.general.OWN_CHECK_TOO_STRICT).
BUGS += [
    Bug("masking", "k_len_check_le", "attention.py", "if k_len < q_len:", "if k_len <= q_len and q_len > 1:",
        "rejects k_len == q_len too (<= for <)",
        diagnosis=("general:own_check_too_strict",)),
    Bug("masking", "additive_mask", "attention.py",
        'return scores.masked_fill(~mask, float("-inf"))', "return scores + (~mask).to(scores.dtype) * -1e9",
        "adds -1e9 where the mask is False (an additive mask, as BERT builds it) instead of replacing the scores",
        diagnosis=("masking:mask_added",)),
    Bug("masking", "additive_mask_1e4", "attention.py",
        'return scores.masked_fill(~mask, float("-inf"))', "return scores + (1.0 - mask.to(scores.dtype)) * -10000.0",
        "adds -10000 to the masked scores, as the original BERT code did",
        diagnosis=("masking:mask_added",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('masking', 'triu_convention', 'attention.py',
        'return ones.tril(diagonal=k_len - q_len)',
        'return ones.triu(diagonal=k_len - q_len + 1)',
        "returns the upper triangle above the diagonal, the 'True means masked' convention",
        diagnosis=("masking:inverted_causal",)),
    Bug('masking', 'plus_inf', 'attention.py',
        'return scores.masked_fill(~mask, float("-inf"))',
        'return scores.masked_fill(~mask, float("inf"))',
        'fills the masked scores with +inf',
        diagnosis=("masking:fill_not_low_enough",)),
    Bug('masking', 'where_inverted', 'attention.py',
        'return scores.masked_fill(~mask, float("-inf"))',
        'return torch.where(mask, float("-inf"), scores)',
        'torch.where(mask, -inf, scores): fills where the mask is True',
        diagnosis=("masking:masked_where_allowed",)),
    Bug('masking', 'fp16_min', 'attention.py',
        'return scores.masked_fill(~mask, float("-inf"))',
        'return scores.masked_fill(~mask, torch.finfo(torch.float16).min)',
        "fills with float16's lowest value, -65504, whatever the dtype",
        diagnosis=("masking:fill_not_low_enough",)),
    Bug('masking', 'arange_lt', 'attention.py',
        'return ones.tril(diagonal=k_len - q_len)',
        'return torch.arange(k_len, device=device)[None, :] < torch.arange(q_len, device=device)[:, None] + (k_len - q_len)',
        'builds the mask from arange with < instead of <=',
        diagnosis=("masking:diagonal_excluded",)),
    Bug('masking', 'arange_no_offset', 'attention.py',
        'return ones.tril(diagonal=k_len - q_len)',
        'return torch.arange(k_len, device=device)[None, :] <= torch.arange(q_len, device=device)[:, None]',
        'builds the mask from arange comparisons without the k_len - q_len offset',
        diagnosis=("masking:offset_ignored",)),
    Bug('masking', 'scores_times_mask', 'attention.py',
        'return scores.masked_fill(~mask, float("-inf"))',
        'return scores * mask',
        'multiplies the scores by the mask instead of filling',
        diagnosis=("masking:filled_with_zero",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('masking', 'shape_k_q', 'attention.py',
        'ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)',
        'ones = torch.ones(k_len, q_len, dtype=torch.bool, device=device)',
        'builds the ones as (k_len, q_len)',
        diagnosis=("masking:mask_sizes",)),
    Bug('masking', 'square_q', 'attention.py',
        'ones = torch.ones(q_len, k_len, dtype=torch.bool, device=device)',
        'ones = torch.ones(q_len, q_len, dtype=torch.bool, device=device)',
        'builds the ones as (q_len, q_len), forgetting k_len',
        diagnosis=("masking:mask_sizes",)),
    Bug("masking", "bool_mask_added", "attention.py", 'return scores.masked_fill(~mask, float("-inf"))',
        "return scores + mask",
        "adds the bool mask to the scores, as if it were an additive one",
        diagnosis=("masking:bool_mask_added",)),
    # Held-out set 14's additive_inf_times_zero_nan.
    Bug("masking", "mask_times_inf", "attention.py", 'return scores.masked_fill(~mask, float("-inf"))',
        'return scores + (~mask).to(scores.dtype) * float("-inf")',
        "builds an additive mask by multiplying by -inf, so 0 * -inf makes every allowed score NaN",
        diagnosis=("masking:mask_times_inf",)),
]
