from . import Bug

# `self.last_attention = ...` is one line shared by the cached and uncached paths of
# MultiHeadAttention.forward: kv_cache's test_last_attention_after_cached_step judges the cached step's weights
# against what the same module keeps without a cache, so that how (and whether) it keeps them costs points
# here only (held-out set 14's last_attention_head_averaged failed kv_cache too).

BUGS = [
    Bug("multi_head_attention", "softmax_over_queries", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-2)",
        "normalises the weights over the queries (dim -2) instead of over the keys",
        diagnosis=("multi_head_attention:softmax_over_queries",)),
    Bug("multi_head_attention", "sdpa_ignores_mask", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = attention_scores(q, k).softmax(dim=-1)",
        "accepts the mask argument but never applies it to the scores",
        diagnosis=("multi_head_attention:mask_ignored",)),
    Bug("multi_head_attention", "mask_multiplied_after_softmax", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = attention_scores(q, k).softmax(dim=-1)\n"
        "    if mask is not None:\n"
        "        weights = weights * mask",
        "zeroes the forbidden weights after the softmax, so the rows no longer sum to 1",
        diagnosis=("multi_head_attention:mask_multiplied",)),
    Bug("multi_head_attention", "weights_transposed_before_v", "attention.py",
        "return weights @ v, weights",
        "return weights.transpose(-2, -1) @ v, weights",
        "multiplies v by the transposed weights, mixing values by key instead of by query",
        diagnosis=("multi_head_attention:weights_transposed",)),
    Bug("multi_head_attention", "keys_and_queries_swapped", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(k, q), mask).softmax(dim=-1)",
        "computes k q^T instead of q k^T, so each row scores one key against all queries",
        diagnosis=("multi_head_attention:q_k_swapped",)),
    Bug("multi_head_attention", "missing_out_proj", "attention.py",
        "return self.out_proj(merge_heads(out))",
        "return merge_heads(out)",
        "forgets the output projection after merging the heads",
        diagnosis=("multi_head_attention:out_proj_missing",)),
    Bug("multi_head_attention", "returns_weights_first", "attention.py",
        "return weights @ v, weights",
        "return weights, weights @ v",
        "returns (weights, out) instead of the contract's (out, weights)",
        diagnosis=("multi_head_attention:results_swapped",)),
    Bug("multi_head_attention", "always_causal", "attention.py",
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)\n",
        "        if mask is None:\n"
        "            mask = causal_mask(q.size(-2), device=x.device)\n"
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)\n",
        "applies a causal mask when no mask is given, as in a decoder, although the default is full attention",
        diagnosis=("multi_head_attention:causal_by_default",)),
]

BUGS += [
    Bug("multi_head_attention", "last_attention_not_detached", "attention.py",
        "self.last_attention = weights.detach()",
        "self.last_attention = weights",
        "keeps the attention weights attached to the autograd graph in last_attention",
        named_by="expected a detached tensor"),
]

BUGS += [
    Bug("multi_head_attention", "library_attention", "attention.py",
        "    weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)\n    return weights @ v, weights\n",
        "    weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)\n"
        "    out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n"
        "    return out, weights\n",
        "computes the output with torch.nn.functional.scaled_dot_product_attention instead of weights @ v",
        named_by="must be written from scratch"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("multi_head_attention", "mask_after_softmax", "attention.py", "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(q, k).softmax(dim=-1), mask)",
        "applies the mask to the weights after the softmax",
        diagnosis=("multi_head_attention:mask_on_weights",)),
]

BUGS += [
    Bug("multi_head_attention", "weights_not_normalised", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(q, k), mask).exp()",
        "exponentiates the scores but never divides by their sum",
        diagnosis=("multi_head_attention:weights_not_normalised",)),
]

# A member of the fitted divisor family (mistakes.MHA_DIVISOR) that no single entry names.
BUGS += [
    Bug("multi_head_attention", "scaled_by_d_model", "attention.py",
        "        out, weights = scaled_dot_product_attention(q, k, v, mask)\n        self.last_attention",
        "        weights = apply_mask(q @ k.transpose(-2, -1) / math.sqrt(self.d_model), mask).softmax(dim=-1)\n"
        "        out = weights @ v\n        self.last_attention",
        "writes the scores inline and scales them by √d_model instead of the head width's root",
        diagnosis=("multi_head_attention:mha_divisor",)),
]

# Members of the softmax-axis family (mistakes.SOFTMAX_AXES): the softmax over a fixed axis, not the keys.
SDPA_SOFTMAX = "apply_mask(attention_scores(q, k), mask).softmax(dim=-1)"
BUGS += [
    Bug("multi_head_attention", "softmax_dim_1", "attention.py", SDPA_SOFTMAX,
        "apply_mask(attention_scores(q, k), mask).softmax(dim=1)",
        "softmax over dim 1 (the heads of (B, H, T, T) scores) instead of the keys",
        diagnosis=("multi_head_attention:softmax_dim_1",)),
    Bug("multi_head_attention", "softmax_dim_2", "attention.py", SDPA_SOFTMAX,
        "apply_mask(attention_scores(q, k), mask).softmax(dim=2)",
        "softmax over dim 2, the keys of (B, T, T) scores but the queries of (B, H, T, T) ones",
        diagnosis=("multi_head_attention:softmax_dim_2", "multi_head_attention:softmax_over_queries")),
    Bug("multi_head_attention", "softmax_dim_0", "attention.py", SDPA_SOFTMAX,
        "apply_mask(attention_scores(q, k), mask).softmax(0)",
        "softmax over dim 0, the batch",
        diagnosis=("multi_head_attention:softmax_dim_0",)),
]

# Further slips of the attention formula and of MultiHeadAttention (a last_attention of one head, ONE_HEAD_KEPT,
# is not here: kv_cache's checks read last_attention too).
BUGS += [
    Bug("multi_head_attention", "log_softmax_weights", "attention.py", SDPA_SOFTMAX,
        "apply_mask(attention_scores(q, k), mask).log_softmax(dim=-1)", "takes log_softmax where softmax is meant",
        diagnosis=("multi_head_attention:log_softmax_weights",)),
    Bug("multi_head_attention", "scaled_by_v_width", "attention.py",
        "apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "apply_mask(q @ k.transpose(-2, -1) / math.sqrt(v.size(-1)), mask).softmax(dim=-1)",
        "scales by the square root of v's width", diagnosis=("multi_head_attention:scaled_by_v_width",)),
    Bug("multi_head_attention", "out_proj_weight_untransposed", "attention.py",
        "return self.out_proj(merge_heads(out))",
        "return merge_heads(out) @ self.out_proj.weight + self.out_proj.bias",
        "applies out_proj by hand with the weight untransposed",
        diagnosis=("multi_head_attention:out_proj_untransposed",)),
]

BUGS += [
    Bug("multi_head_attention", "sdpa_scales_again", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(q, k) / math.sqrt(q.size(-1)), mask).softmax(dim=-1)",
        "scaled_dot_product_attention divides the scores by sqrt(d) again, after attention_scores did",
        diagnosis=("multi_head_attention:sdpa_scaled_twice", "multi_head_attention:scaled_twice")),
    Bug("multi_head_attention", "scores_from_values", "attention.py",
        "weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)",
        "weights = apply_mask(attention_scores(q, v), mask).softmax(dim=-1)",
        "compares the queries with the values instead of the keys (a copy-paste of v for k)",
        diagnosis=("multi_head_attention:scores_from_v",)),
    Bug("multi_head_attention", "bmm_for_weights", "attention.py",
        "return weights @ v, weights", "return torch.bmm(weights, v), weights",
        "multiplies the weights and the values with torch.bmm, which takes 3-D tensors only",
        diagnosis=("general:bmm_not_3d",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('multi_head_attention', 'sdpa_inverted_inline', 'attention.py',
        'weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)',
        "scores = attention_scores(q, k)\n    if mask is not None:\n        scores = scores.masked_fill(mask, float('-inf'))\n    weights = scores.softmax(dim=-1)",
        'masks inline with masked_fill(mask, -inf), filling where the mask is True',
        diagnosis=("multi_head_attention:mask_inverted",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('multi_head_attention', 'weights_times_k', 'attention.py',
        'return weights @ v, weights',
        'return weights @ k, weights',
        'multiplies the weights by k instead of v (copy-paste)',
        diagnosis=("multi_head_attention:values_from_k",)),
    Bug('multi_head_attention', 'returns_scores', 'attention.py',
        'weights = apply_mask(attention_scores(q, k), mask).softmax(dim=-1)\n    return weights @ v, weights',
        'scores = apply_mask(attention_scores(q, k), mask)\n    return scores.softmax(dim=-1) @ v, scores',
        'returns the masked scores as the weights',
        diagnosis=("multi_head_attention:scores_as_weights",)),
    Bug('multi_head_attention', 'einsum_weights_4d', 'attention.py',
        'return weights @ v, weights',
        "return torch.einsum('bhij,bhjd->bhid', weights, v), weights",
        "writes weights @ v as einsum('bhij,bhjd->bhid'), 4-D only",
        diagnosis=("general:einsum_fixed_rank",)),
    Bug("multi_head_attention", "last_attention_head_averaged", "attention.py",
        "self.last_attention = weights.detach()", "self.last_attention = weights.mean(dim=1).detach()",
        "keeps the weights averaged over the heads, as nn.MultiheadAttention returns them by default",
        diagnosis=("multi_head_attention:weights_averaged",)),
    Bug("multi_head_attention", "last_attention_not_kept", "attention.py",
        "self.last_attention = weights.detach()", "pass", "never stores the weights in last_attention",
        named_by="last_attention"),
    # Held-out set 14's functional_dropout_always_on.
    Bug("multi_head_attention", "functional_dropout", "attention.py", "return weights @ v, weights",
        "return torch.nn.functional.dropout(weights, p=0.1) @ v, weights",
        "adds F.dropout to the weights, which drops in eval mode too (training=True by default)",
        diagnosis=("multi_head_attention:random_attention",)),
]
