from . import Bug

REPEAT = "return x[:, :, None].expand(B, H, n_rep, T, Dh).reshape(B, H * n_rep, T, Dh)"
ROPE = "q, k = apply_rope(q, *rope, positions), apply_rope(k, *rope, positions)"
START = "start = 0 if cache is None else len(cache)"
CACHE = ("            k, v = cache.update(k, v)  # (B, Hkv, T_cached + T, Dh)\n"
         "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n")
ATTEND = "out, _ = scaled_dot_product_attention(q, repeat_kv(k, n_rep), repeat_kv(v, n_rep), mask)"
ROTATE_AND_CACHE = (
    "        if rope is not None:\n"
    "            start = 0 if cache is None else len(cache)\n"
    "            positions = torch.arange(start, start + x.size(1), device=x.device)\n"
    "            q, k = apply_rope(q, *rope, positions), apply_rope(k, *rope, positions)\n"
    "        if cache is not None:\n"
    "            k, v = cache.update(k, v)  # (B, Hkv, T_cached + T, Dh)\n"
    "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n")

BUGS = [
    # The order of the groups: .repeat tiles where repeat_interleave repeats in a row (a known slip, e.g.
    # wenet-e2e/west#121 for the batch); the shapes agree, only the values tell.
    Bug("grouped_query_attention", "tiled_groups", "gqa.py", REPEAT,
        "return x.repeat(1, n_rep, 1, 1)",
        "repeats the key/value heads with x.repeat, so query head h uses kv head h % n_kv_heads",
        diagnosis=("grouped_query_attention:tile", "grouped_query_attention:repeat_kv_tiled")),
    Bug("grouped_query_attention", "repeat_along_sequence", "gqa.py", REPEAT,
        "return torch.repeat_interleave(x, n_rep, dim=2)",
        "repeats along the sequence dimension instead of the heads (the dims of (B, T, H, Dh) and (B, H, T, Dh) "
        "confused, as in PrimeIntellect-ai/prime-rl#2681)",
        diagnosis=("grouped_query_attention:repeat_kv_sequence",)),
    Bug("grouped_query_attention", "full_width_kv", "gqa.py",
        "self.w_k = nn.Linear(d_model, n_kv_heads * self.d_k, bias=bias)",
        "self.w_k = nn.Linear(d_model, d_model, bias=bias)",
        "keeps w_k as wide as in multi-head attention, d_model features instead of n_kv_heads * d_k",
        diagnosis=("grouped_query_attention:kv_layer_full_width",)),
    Bug("grouped_query_attention", "rope_on_queries_only", "gqa.py", ROPE,
        "q = apply_rope(q, *rope, positions)",
        "rotates the queries but forgets the keys",
        diagnosis=("grouped_query_attention:cached_keys_not_rotated", "grouped_query_attention:rope_q_only")),
    Bug("grouped_query_attention", "rope_ignored", "gqa.py", ROPE,
        "pass",
        "accepts rope but never rotates anything",
        diagnosis=("grouped_query_attention:cached_keys_not_rotated", "grouped_query_attention:no_rope")),
    Bug("grouped_query_attention", "rope_positions_from_zero", "gqa.py", START,
        "start = 0",
        "rotates every call's positions from 0, forgetting the cached offset (pytorch/executorch#2010)",
        diagnosis=("grouped_query_attention:rope_from_zero",)),
    Bug("grouped_query_attention", "rope_after_caching", "gqa.py", ROTATE_AND_CACHE,
        "        if cache is not None:\n"
        "            k, v = cache.update(k, v)  # (B, Hkv, T_cached + T, Dh)\n"
        "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n"
        "        if rope is not None:\n"
        "            start = 0 if cache is None else len(cache) - x.size(1)\n"
        "            positions = torch.arange(start, start + x.size(1), device=x.device)\n"
        "            q = apply_rope(q, *rope, positions)\n"
        "            k = apply_rope(k, *rope, torch.arange(k.size(-2), device=x.device))\n",
        "caches the keys unrotated and rotates all of them again at every call: the attention is right, "
        "the cache holds the wrong keys and every step redoes the work",
        diagnosis=("grouped_query_attention:cached_keys_not_rotated",)),
    Bug("grouped_query_attention", "cached_keys_rotated_again", "gqa.py", CACHE,
        CACHE + "            if rope is not None:\n"
                "                k = apply_rope(k, *rope, torch.arange(k.size(-2), device=x.device))\n",
        "rotates the keys before caching them and once more after cache.update returns them",
        diagnosis=("grouped_query_attention:rope_twice",)),
    Bug("grouped_query_attention", "cache_holds_repeated_heads", "gqa.py",
        "        if cache is not None:\n" + CACHE
        + "        n_rep = self.n_heads // self.n_kv_heads\n        " + ATTEND,
        "        n_rep = self.n_heads // self.n_kv_heads\n"
        "        k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n"
        "        if cache is not None:\n" + CACHE + "        out, _ = scaled_dot_product_attention(q, k, v, mask)",
        "repeats the keys and values before caching them, so the cache holds n_heads heads and saves nothing",
        diagnosis=("grouped_query_attention:cache_after_repeat",)),
    Bug("grouped_query_attention", "cached_mask_without_offset", "gqa.py",
        "mask = causal_mask(q.size(-2), k.size(-2), device=x.device)",
        "mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=x.device).tril()",
        "builds the cached causal mask with tril() and no offset, so new query i sees only keys 0 .. i",
        diagnosis=("grouped_query_attention:mask_without_offset",)),
    Bug("grouped_query_attention", "scaled_by_d_model", "gqa.py", ATTEND,
        "k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)\n"
        "        scores = (q @ k.transpose(-2, -1) / self.d_model ** 0.5)\n"
        "        if mask is not None:\n"
        "            scores = scores.masked_fill(~mask, float(\"-inf\"))\n"
        "        out = scores.softmax(dim=-1) @ v",
        "writes its own attention and divides the scores by sqrt(d_model) instead of sqrt(d_k)",
        diagnosis=("grouped_query_attention:scale_d_model",)),
    Bug("grouped_query_attention", "kv_split_without_transpose", "gqa.py",
        "        k = split_heads(self.w_k(x), self.n_kv_heads)  # (B, Hkv, T, Dh)\n"
        "        v = split_heads(self.w_v(x), self.n_kv_heads)\n",
        "        k = self.w_k(x).reshape(x.size(0), self.n_kv_heads, x.size(1), self.d_k)\n"
        "        v = self.w_v(x).reshape(x.size(0), self.n_kv_heads, x.size(1), self.d_k)\n",
        "splits the keys and values into heads with a plain reshape, without swapping T and the heads",
        diagnosis=("grouped_query_attention:kv_no_transpose",)),
]

# A member of the fitted axis family (mistakes.REPEAT_KV_AXIS) that no single entry names.
BUGS += [
    Bug("grouped_query_attention", "repeat_kv_copies_after_sequence", "gqa.py",
        "return x[:, :, None].expand(B, H, n_rep, T, Dh).reshape(B, H * n_rep, T, Dh)",
        "return x[:, :, :, None].expand(B, H, T, n_rep, Dh).reshape(B, H * n_rep, T, Dh)",
        "puts the copies' axis after the sequence, so the reshape mixes positions into the heads",
        diagnosis=("grouped_query_attention:repeat_kv_axis",)),
]

# The copies along another dim (mistakes.REPEAT_KV_DIM): held-out set 8's repeat_on_batch_axis and its siblings.
BUGS += [
    Bug("grouped_query_attention", "repeat_on_batch_axis", "gqa.py", REPEAT, "return x.repeat_interleave(n_rep, dim=0)",
        "repeat_kv repeats along dim 0 (the batch) instead of the heads", diagnosis=("grouped_query_attention:repeat_kv_dim",)),
    Bug("grouped_query_attention", "tile_on_batch_axis", "gqa.py", REPEAT, "return x.repeat(n_rep, 1, 1, 1)",
        "repeat_kv tiles along dim 0 (the batch)", diagnosis=("grouped_query_attention:repeat_kv_dim",)),
    Bug("grouped_query_attention", "tile_on_sequence_axis", "gqa.py", REPEAT, "return x.repeat(1, 1, n_rep, 1)",
        "repeat_kv tiles the sequence instead of the heads", diagnosis=("grouped_query_attention:repeat_kv_dim",)),
]

# out_proj left out, and one layer with a bias it should not have (mistakes: no_out_proj, GQA_LAYER_BIAS).
BUGS += [
    Bug("grouped_query_attention", "no_out_proj", "gqa.py", "return self.out_proj(merge_heads(out))",
        "return merge_heads(out)", "returns the merged heads without out_proj",
        diagnosis=("grouped_query_attention:no_out_proj",)),
    Bug("grouped_query_attention", "out_proj_always_biased", "gqa.py",
        "self.out_proj = nn.Linear(d_model, d_model, bias=bias)", "self.out_proj = nn.Linear(d_model, d_model)",
        "forgets bias=bias on out_proj", diagnosis=("grouped_query_attention:layer_bias",)),
]

# Keys or values with the wrong number of heads, named from the error the attention raises and the check's sizes
# (mistakes.gqa_heads_error: KV_SPLIT_N_HEADS, the GQA_N_REP family): held-out set 10's k_split_n_heads and
# n_rep_kv_heads, and a sibling each.
BUGS += [
    Bug("grouped_query_attention", "keys_split_into_n_heads", "gqa.py",
        "k = split_heads(self.w_k(x), self.n_kv_heads)", "k = split_heads(self.w_k(x), self.n_heads)",
        "splits the keys into n_heads heads, as for the queries", diagnosis=("grouped_query_attention:kv_split_n_heads",)),
    Bug("grouped_query_attention", "values_split_into_n_heads", "gqa.py",
        "v = split_heads(self.w_v(x), self.n_kv_heads)", "v = split_heads(self.w_v(x), self.n_heads)",
        "splits the values into n_heads heads", diagnosis=("grouped_query_attention:kv_split_n_heads",)),
    Bug("grouped_query_attention", "n_rep_is_n_kv_heads", "gqa.py", "n_rep = self.n_heads // self.n_kv_heads",
        "n_rep = self.n_kv_heads", "repeats each key/value head n_kv_heads times",
        diagnosis=("grouped_query_attention:n_rep",)),
    Bug("grouped_query_attention", "n_rep_is_n_heads", "gqa.py", "n_rep = self.n_heads // self.n_kv_heads",
        "n_rep = self.n_heads", "repeats each key/value head n_heads times",
        diagnosis=("grouped_query_attention:n_rep",)),
    Bug("grouped_query_attention", "no_mask_with_cache", "gqa.py",
        "mask = causal_mask(q.size(-2), k.size(-2), device=x.device)", "mask = None",
        "drops the causal mask on the cached path, which is right for one new token only",
        diagnosis=("grouped_query_attention:no_mask_with_cache",)),
    Bug("grouped_query_attention", "rope_on_values_too", "gqa.py", ROPE,
        "q, k, v = apply_rope(q, *rope, positions), apply_rope(k, *rope, positions), apply_rope(v, *rope, positions)",
        "rotates the values as well as the queries and keys",
        diagnosis=("grouped_query_attention:rope_rotates",)),
    Bug("grouped_query_attention", "rope_on_keys_only", "gqa.py", ROPE,
        "k = apply_rope(k, *rope, positions)",
        "rotates the keys but forgets the queries",
        diagnosis=("grouped_query_attention:rope_rotates",)),
    Bug("grouped_query_attention", "rope_on_values_not_keys", "gqa.py", ROPE,
        "q, v = apply_rope(q, *rope, positions), apply_rope(v, *rope, positions)",
        "rotates the values where the keys belong (a v typed for a k)",
        diagnosis=("grouped_query_attention:rope_rotates", "grouped_query_attention:cached_keys_not_rotated")),
    # Held-out set 14's empty_cache_skips_mask_check.
    Bug("grouped_query_attention", "cache_truth_value", "gqa.py", "        if cache is not None and mask is not None:",
        "        if cache and mask is not None:", "tests the cache by its truth value, False while it is empty",
        diagnosis=("grouped_query_attention:cache_truth_value",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): the start of the rotation counted on the module, as a decoder that
    # only ever serves one sequence may; every check that built a module for one sequence passed.
    Bug("grouped_query_attention", "positions_counted_on_module", "gqa.py",
        "            start = 0 if cache is None else len(cache)\n",
        "            start = 0 if cache is None else getattr(self, \"pos\", 0)  # positions decoded so far\n"
        "            if cache is not None:\n"
        "                self.pos = start + x.size(1)\n",
        "counts the decoded positions on the module (self.pos) instead of reading len(cache), so a second sequence "
        "decoded through the same module with a fresh cache is rotated from where the first one stopped",
        diagnosis=("grouped_query_attention:positions_counted_on_module",)),
]
