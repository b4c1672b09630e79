from . import Bug

UPDATE = ("            self.k = torch.cat([self.k, k], dim=-2)\n"
          "            self.v = torch.cat([self.v, v], dim=-2)\n")
CACHED_BRANCH = (
    "        q, k, v = (split_heads(t, self.n_heads) for t in self.project_qkv(x))\n"
    "        if cache is not None:\n"
    "            if mask is not None:\n"
    '                raise ValueError("pass either a mask or a cache, not both: the cache implies a causal mask")\n'
    "            k, v = cache.update(k, v)\n"
    "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n"
)

BUGS = [
    Bug("kv_cache", "cache_forgets", "kv_cache.py",
        UPDATE,
        "            self.k, self.v = k, v\n",
        "overwrites the cached keys and values with the new ones instead of appending",
        diagnosis=("kv_cache:cache_forgets", "kv_cache:as_if_no_cache", "kv_cache:new_positions_only", "kv_cache:blocks_uncached")),
    Bug("kv_cache", "concatenates_features", "kv_cache.py",
        UPDATE,
        UPDATE.replace("dim=-2", "dim=-1"),
        "concatenates along the last dimension (the head features) instead of the sequence dimension",
        diagnosis=("kv_cache:cat_features",)),
    Bug("kv_cache", "len_is_batch_size", "kv_cache.py",
        "return 0 if self.k is None else self.k.size(-2)",
        "return 0 if self.k is None else len(self.k)",
        "takes len() of the key tensor, which counts its first dimension (the batch), not the positions",
        diagnosis=("kv_cache:len_counts_batch",)),
    Bug("kv_cache", "forward_ignores_cache", "attention.py",
        "            k, v = cache.update(k, v)\n",
        "            cache.update(k, v)\n",
        "appends to the cache but keeps attending only to the new keys and values, dropping what update returns",
        diagnosis=("kv_cache:as_if_no_cache", "kv_cache:new_positions_only", "kv_cache:blocks_uncached")),
    Bug("kv_cache", "no_causal_mask_with_cache", "attention.py",
        "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n",
        "            mask = None\n",
        "assumes a cache means one token at a time, so a multi-token prefill attends to its own future",
        diagnosis=("kv_cache:no_causal_mask", "kv_cache:blocks_uncached")),
    Bug("kv_cache", "block_drops_cache", "block.py",
        "self.attention(self.norm1(x), mask, cache)",
        "self.attention(self.norm1(x), mask)",
        "TransformerBlock.forward accepts a cache but never hands it to its attention",
        diagnosis=("kv_cache:blocks_uncached",)),
    Bug("kv_cache", "mask_with_cache_accepted", "attention.py",
        "            if mask is not None:\n"
        '                raise ValueError("pass either a mask or a cache, not both: the cache implies a causal mask")\n',
        "",
        "silently replaces a caller's mask with the causal one instead of rejecting the combination",
        named_by="expected a ValueError"),
    Bug("kv_cache", "caches_before_head_split", "attention.py",
        CACHED_BRANCH,
        "        q, k, v = self.project_qkv(x)\n"
        "        if cache is not None:\n"
        "            if mask is not None:\n"
        '                raise ValueError("pass either a mask or a cache, not both: the cache implies a causal mask")\n'
        "            k, v = cache.update(k, v)\n"
        "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n"
        "        q, k, v = (split_heads(t, self.n_heads) for t in (q, k, v))\n",
        "stores (B, T, D) keys and values in the cache, splitting heads only afterwards",
        diagnosis=("kv_cache:cached_before_split",)),
    Bug("kv_cache", "appends_twice", "attention.py",
        "            k, v = cache.update(k, v)\n",
        "            cache.update(k, v)\n            k, v = cache.update(k, v)\n",
        "calls cache.update once to store and once more to read, appending every position twice",
        diagnosis=("kv_cache:appended_twice",)),
    Bug("kv_cache", "mask_from_new_tokens_only", "attention.py",
        "            mask = causal_mask(q.size(-2), k.size(-2), device=x.device)\n",
        "            mask = causal_mask(q.size(-2), device=x.device)\n",
        "builds a square causal mask over the new positions only, forgetting the cached ones",
        diagnosis=("kv_cache:mask_over_new_only",)),
    Bug("kv_cache", "len_of_empty_cache", "kv_cache.py",
        "return 0 if self.k is None else self.k.size(-2)",
        "return self.k.size(-2)",
        "forgets that a new cache holds no tensor yet, so len() of an empty cache fails",
        diagnosis=("kv_cache:empty_len_fails",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("kv_cache", "prepends_new", "kv_cache.py", "self.k = torch.cat([self.k, k], dim=-2)\n            self.v = torch.cat([self.v, v], dim=-2)",
        "self.k = torch.cat([k, self.k], dim=-2)\n            self.v = torch.cat([v, self.v], dim=-2)",
        "puts the new keys and values before the cached ones",
        diagnosis=("kv_cache:new_before_cached", "kv_cache:new_keys_first")),
]

# Members of the fitted cached-mask family (mistakes.CACHED_MASK_DIAGONAL) that no single entry names.
BUGS += [
    Bug("kv_cache", "cached_mask_without_offset", "attention.py",
        "mask = causal_mask(q.size(-2), k.size(-2), device=x.device)",
        "mask = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=x.device).tril()",
        "builds the cached forward's mask as a plain tril, without the offset of the cached positions",
        diagnosis=("kv_cache:cached_mask_diagonal",)),
]

# torch's own error that names the mistake (mistakes.general.TENSOR_AS_BOOL).
TRUTH = ("general:tensor_as_bool",)
BUGS += [
    Bug("kv_cache", "truthiness_of_tensor", "kv_cache.py", "if self.k is None:", "if not self.k:",
        "tests the cached tensor's truthiness (if not self.k) instead of `is None`",
        diagnosis=TRUTH),
    Bug("kv_cache", "len_by_truthiness", "kv_cache.py",
        "return 0 if self.k is None else self.k.size(-2)", "return self.k.size(-2) if self.k else 0",
        "__len__ asks whether the cached tensor is truthy",
        diagnosis=TRUTH),
    # update rightly refuses keys of another layout than what the cache holds (x, stored by the forward): no
    # "your own check raised ValueError on a valid call", whose call was valid only by the contract.
    Bug("kv_cache", "forward_stores_input", "attention.py", "            k, v = cache.update(k, v)\n",
        "            past, _ = cache.update(x, x)  # the inputs so far: their keys and values are computed again\n"
        "            _, k, v = (split_heads(t, self.n_heads) for t in self.project_qkv(past))\n",
        "keeps the layer's inputs in the cache and projects every position again, with an update that checks that "
        "new entries fit the cached ones",
        diagnosis=("kv_cache:stored_input",),
        also=(("kv_cache.py", '        """Append k, v (B, H, T_new, Dh) and return everything cached so far."""\n',
               '        """Append k, v (B, H, T_new, Dh) and return everything cached so far."""\n'
               '        if self.k is not None and k.shape[:-2] != self.k.shape[:-2]:\n'
               '            raise ValueError(f"cannot append {tuple(k.shape)} to {tuple(self.k.shape)}")\n'),)),
    # Not appends_twice (forward calling update twice): the lengths after later calls tell the two apart.
    Bug("kv_cache", "update_without_else", "kv_cache.py",
        "        if self.k is None:\n            self.k, self.v = k, v\n        else:\n"
        "            self.k = torch.cat([self.k, k], dim=-2)\n            self.v = torch.cat([self.v, v], dim=-2)\n",
        "        if self.k is None:\n            self.k, self.v = k, v\n"
        "        self.k = torch.cat([self.k, k], dim=-2)\n        self.v = torch.cat([self.v, v], dim=-2)\n",
        "forgets the else: the first update stores k and v, then appends them again",
        diagnosis=("kv_cache:first_chunk_twice",)),
    Bug("kv_cache", "cat_or_first", "kv_cache.py",
        "        if self.k is None:\n            self.k, self.v = k, v\n        else:\n"
        "            self.k = torch.cat([self.k, k], dim=-2)\n            self.v = torch.cat([self.v, v], dim=-2)\n",
        "        self.k = torch.cat([self.k, k], dim=-2) if self.k else k\n"
        "        self.v = torch.cat([self.v, v], dim=-2) if self.v else v\n",
        "a one-line append that asks `if self.k` for 'is there a cache yet'",
        diagnosis=TRUTH),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('kv_cache', 'cat_heads', 'kv_cache.py',
        'self.k = torch.cat([self.k, k], dim=-2)\n            self.v = torch.cat([self.v, v], dim=-2)',
        'self.k = torch.cat([self.k, k], dim=1)\n            self.v = torch.cat([self.v, v], dim=1)',
        'concatenates along dim 1, the heads',
        diagnosis=("kv_cache:cat_heads",)),
    Bug('kv_cache', 'returns_new_only', 'kv_cache.py',
        '        return self.k, self.v\n',
        '        return k, v\n',
        'update appends but returns only the new k and v',
        diagnosis=("kv_cache:cache_forgets", "kv_cache:as_if_no_cache", "kv_cache:blocks_uncached", "kv_cache:new_positions_only")),
    Bug('kv_cache', 'len_head_dim', 'kv_cache.py',
        'return 0 if self.k is None else self.k.size(-2)',
        'return 0 if self.k is None else self.k.size(-1)',
        '__len__ returns the last dimension (head features)',
        diagnosis=("kv_cache:len_counts_features",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('kv_cache', 'v_from_k', 'kv_cache.py',
        'self.v = torch.cat([self.v, v], dim=-2)',
        'self.v = torch.cat([self.v, k], dim=-2)',
        'appends k to the cached values (copy-paste of the k line)',
        diagnosis=("kv_cache:crossed",)),
    Bug('kv_cache', 'first_v_is_k', 'kv_cache.py',
        'self.k, self.v = k, v',
        'self.k, self.v = k, k',
        'stores k as the values on the first call',
        diagnosis=("kv_cache:crossed_first",)),
    Bug('kv_cache', 'mask_args_swapped', 'attention.py',
        'mask = causal_mask(q.size(-2), k.size(-2), device=x.device)',
        'mask = causal_mask(k.size(-2), q.size(-2), device=x.device)',
        'calls causal_mask(k_len, q_len) with a cache',
        diagnosis=("kv_cache:mask_sizes_swapped",)),
    # Held-out set 15's update_not_stored.
    Bug("kv_cache", "concatenation_not_stored", "kv_cache.py",
        "            self.k = torch.cat([self.k, k], dim=-2)\n            self.v = torch.cat([self.v, v], dim=-2)",
        "            return torch.cat([self.k, k], dim=-2), torch.cat([self.v, v], dim=-2)",
        "returns the concatenation from update without storing it",
        diagnosis=("kv_cache:concatenation_not_stored",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): the layer keeps the first cache it was handed, as LLaMA's Attention
    # keeps cache_k and cache_v; every check built a module for one sequence.
    Bug("kv_cache", "first_cache_kept", "attention.py",
        "            k, v = cache.update(k, v)\n",
        "            if getattr(self, \"cache\", None) is None:  # the layer keeps its cache\n"
        "                self.cache = cache\n"
        "            k, v = self.cache.update(k, v)\n",
        "keeps the first cache it was handed on the module and appends to it on every later call, so a second "
        "sequence decoded with a fresh cache attends to the first one's keys and values",
        diagnosis=("kv_cache:first_cache_kept",)),
]
