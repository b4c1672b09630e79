from . import Bug

SCORES = "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))"

BUGS = [
    Bug("scaling", "no_scale", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1)",
        "forgets to divide the dot products by sqrt(d)",
        diagnosis=("scaling:no_scale",)),
    Bug("scaling", "divide_by_d", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) / q.size(-1)",
        "divides by d instead of sqrt(d)",
        diagnosis=("scaling:divided_by_d",)),
    Bug("scaling", "multiply_by_sqrt_d", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) * math.sqrt(q.size(-1))",
        "multiplies by sqrt(d) instead of dividing",
        diagnosis=("scaling:multiplied_by_sqrt_d",)),
    Bug("scaling", "sqrt_of_sequence_length", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-2))",
        "takes the scale from the sequence dimension instead of the feature dimension",
        diagnosis=("scaling:divided_by_sqrt_queries",)),
    Bug("scaling", "transpose_dims_1_2", "attention.py", SCORES,
        "return q @ k.transpose(1, 2) / math.sqrt(q.size(-1))",
        "transposes dimensions 1 and 2 of k, which is right only for 3-D (B, T, d) inputs",
        diagnosis=("scaling:fixed_transpose",)),
    Bug("scaling", "k_dot_T", "attention.py", SCORES,
        "return q @ k.T / math.sqrt(q.size(-1))",
        "uses k.T, which reverses every dimension of a batched k instead of the last two",
        diagnosis=("scaling:k_dot_t",)),
    # Held-out set 12's q_at_k: the matmul raises on every case (d differs from Tk in each), with 2-D and
    # batched wordings of torch's error.
    Bug("scaling", "k_not_transposed", "attention.py", SCORES,
        "return q @ k / math.sqrt(q.size(-1))",
        "multiplies q by k without transposing k",
        diagnosis=("scaling:k_not_transposed",)),
    Bug("scaling", "scale_in_place", "attention.py", SCORES,
        "q /= math.sqrt(q.size(-1))\n    return q @ k.transpose(-2, -1)",
        "scales q in place, changing the caller's tensor",
        diagnosis=("scaling:q_scaled_in_place",)),
]

BUGS += [
    Bug("scaling", "softmax_in_scores", "attention.py", SCORES,
        "return (q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))).softmax(dim=-1)",
        "applies the softmax already in attention_scores (returns weights, not scores)",
        diagnosis=("scaling:softmax_applied",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("scaling", "scale_by_first_dim", "attention.py", "/ math.sqrt(q.size(-1))",
        "/ math.sqrt(q.size(0))",
        "takes the scale from q's first dimension (the batch) instead of its last",
        diagnosis=("scaling:divided_by_sqrt_first_dim",)),
]

BUGS += [
    Bug("scaling", "divides_by_d_squared", "attention.py", "/ math.sqrt(q.size(-1))", "/ q.size(-1) ** 2",
        "divides the dot products by d squared",
        diagnosis=("scaling:power_of_d",)),
]

# A member of the power family (mistakes.POWER_OF_D) that no single entry names.
BUGS += [
    Bug("scaling", "divided_by_d_to_1_5", "attention.py", "/ math.sqrt(q.size(-1))", "/ q.size(-1) ** 1.5",
        "divides by d ** 1.5, mixing up the power of d",
        diagnosis=("scaling:power_of_d",)),
]

# A result whose dtype does not follow the inputs' (mistakes.general.FLOAT_DTYPE_CHANGED, weighed by every comparison).
DTYPE = ("general:float_dtype_changed",)
BUGS += [
    Bug("scaling", "upcasts_to_float32", "attention.py",
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "return (q @ k.transpose(-2, -1)).float() / math.sqrt(q.size(-1))",
        "mixed-precision habit: upcasts the scores to float32, so float64 inputs lose their dtype",
        diagnosis=DTYPE),
    Bug("scaling", "matmul_in_float32", "attention.py",
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "return q.float() @ k.float().transpose(-2, -1) / math.sqrt(q.size(-1))",
        "casts q and k to float32 before the product",
        diagnosis=DTYPE),
    Bug("scaling", "scale_tensor_in_float32", "attention.py",
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "return (q @ k.transpose(-2, -1)).to(torch.float32) * torch.rsqrt(torch.tensor(q.size(-1), dtype=torch.float32))",
        "computes the scale as a float32 tensor and casts the scores to match it",
        diagnosis=DTYPE),
]

# The scores transposed, k·qᵀ (an einsum with its output letters swapped).
BUGS += [
    Bug("scaling", "einsum_output_swapped", "attention.py",
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "return torch.einsum('...id,...jd->...ji', q, k) / math.sqrt(q.size(-1))",
        "writes the einsum's output as ...ji, so the scores come back (..., Tk, Tq)",
        diagnosis=("scaling:scores_transposed",)),
    Bug("scaling", "k_times_q_transposed", "attention.py",
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "return k @ q.transpose(-2, -1) / math.sqrt(q.size(-1))",
        "multiplies k by qᵀ",
        diagnosis=("scaling:scores_transposed",)),
]

BUGS += [  # the square root written as ** 1 / 2, which Python reads as (d ** 1) / 2
    Bug("scaling", "half_power_as_division", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) / q.size(-1) ** 1 / 2",
        "writes the square root as d ** 1 / 2: the scores are divided by 2d",
        diagnosis=("scaling:half_power_as_division",)),
    Bug("scaling", "half_power_in_parentheses", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) / (q.size(-1) ** 1 / 2)",
        "writes the square root as (d ** 1 / 2): the scores are divided by d/2",
        diagnosis=("scaling:half_power_in_parentheses",)),
    Bug("scaling", "sqrt_of_size_1", "attention.py", SCORES,
        "return q @ k.transpose(-2, -1) / math.sqrt(q.size(1))",
        "reads d with a fixed index, q.size(1): the heads of a (B, H, T, d) input, the queries of a (B, T, d) one",
        diagnosis=("scaling:sqrt_of_leading_dim", "scaling:divided_by_sqrt_queries")),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('scaling', 'sqrt_of_k_len', 'attention.py',
        '/ math.sqrt(q.size(-1))',
        '/ math.sqrt(k.size(-2))',
        "takes the scale from k's sequence dimension",
        diagnosis=("scaling:divided_by_sqrt_keys",)),
    Bug('scaling', 'both_scaled', 'attention.py',
        'return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))',
        'd = q.size(-1)\n    return (q / math.sqrt(d)) @ (k / math.sqrt(d)).transpose(-2, -1)',
        'divides both q and k by sqrt(d), so the dot products are divided by d',
        diagnosis=("scaling:divided_by_d",)),
    Bug('scaling', 'permute_3d', 'attention.py',
        'return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))',
        'return q @ k.permute(0, 2, 1) / math.sqrt(q.size(-1))',
        'transposes k with permute(0, 2, 1), which assumes 3-D inputs',
        diagnosis=("scaling:fixed_transpose",)),
    Bug('scaling', 'neg_half_precedence', 'attention.py',
        'return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))',
        'return q @ k.transpose(-2, -1) * q.size(-1) ** -1 / 2',
        'multiplies by d ** -1 / 2, which Python reads as (d ** -1) / 2',
        diagnosis=("scaling:half_power_as_division",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('scaling', 'einsum_4d', 'attention.py',
        'return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))',
        "return torch.einsum('bhid,bhjd->bhij', q, k) / math.sqrt(q.size(-1))",
        "writes the scores as einsum('bhid,bhjd->bhij'), which takes 4-D inputs only",
        diagnosis=("general:einsum_fixed_rank",)),
]
