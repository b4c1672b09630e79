from . import Bug

BLOCK_FORWARD = """        h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)
        return h + self.ffn(self.ffn_norm(h))"""
BUFFERS = """        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)"""
LOOP = "            x = block(x, mask, rope=rope, cache=None if caches is None else caches[i])"
MASK = "        mask = None if caches is not None else causal_mask(idx.size(1), device=idx.device)"

BUGS = [
    Bug("tiny_lm", "post_norm", "gpt.py", BLOCK_FORWARD,
        """        h = self.attn_norm(x + self.attn(x, mask, rope=rope, cache=cache))
        return self.ffn_norm(h + self.ffn(h))""",
        "normalises after each residual addition (post-norm) instead of each branch's input",
        diagnosis=("tiny_lm:post_norm",)),
    Bug("tiny_lm", "attn_residual_from_normed", "gpt.py", BLOCK_FORWARD,
        """        n = self.attn_norm(x)
        h = n + self.attn(n, mask, rope=rope, cache=cache)
        return h + self.ffn(self.ffn_norm(h))""",
        "adds the attention to the normalised input instead of x",
        diagnosis=("tiny_lm:attn_residual_from_normed",)),
    Bug("tiny_lm", "ffn_residual_from_x", "gpt.py", BLOCK_FORWARD,
        """        h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)
        return x + self.ffn(self.ffn_norm(h))""",
        "adds the feed-forward branch to x instead of h, dropping the attention's contribution",
        diagnosis=("tiny_lm:ffn_residual_from_x",)),
    Bug("tiny_lm", "ffn_uses_attn_norm", "gpt.py", "        return h + self.ffn(self.ffn_norm(h))",
        "        return h + self.ffn(self.attn_norm(h))",
        "normalises the feed-forward's input with the attention's norm",
        diagnosis=("tiny_lm:shared_norm",)),
    Bug("tiny_lm", "no_final_norm", "gpt.py", "        return self.head(self.norm(x))",
        "        return self.head(x)",
        "creates the final norm but never applies it before the head",
        diagnosis=("tiny_lm:no_final_norm",)),
    Bug("tiny_lm", "rope_persistent", "gpt.py", BUFFERS,
        """        self.register_buffer("rope_cos", cos)
        self.register_buffer("rope_sin", sin)""",
        "registers the RoPE tables as persistent buffers, so they land in the state dict",
        diagnosis=("tiny_lm:rope_tables_saved",)),
    Bug("tiny_lm", "rope_head_dim_d_model", "gpt.py",
        "cos, sin = rope_angles(max_len, d_model // n_heads, rope_base)",
        "cos, sin = rope_angles(max_len, d_model, rope_base)",
        "builds the RoPE tables for the model's width instead of one head's",
        diagnosis=("tiny_lm:rope_for_d_model",)),
    Bug("tiny_lm", "rope_base_ignored", "gpt.py",
        "cos, sin = rope_angles(max_len, d_model // n_heads, rope_base)",
        "cos, sin = rope_angles(max_len, d_model // n_heads)",
        "forgets to pass rope_base on, so the tables always use 10000",
        diagnosis=("tiny_lm:default_base",)),
    Bug("tiny_lm", "rope_not_passed", "gpt.py", LOOP,
        "            x = block(x, mask, cache=None if caches is None else caches[i])",
        "never gives the blocks the RoPE tables: no position information at all",
        diagnosis=("tiny_lm:no_rope",)),
    Bug("tiny_lm", "shared_cache_object", "gpt.py", "        return [KVCache() for _ in self.blocks]",
        "        return [KVCache()] * len(self.blocks)",
        "repeats one KVCache object for every block",
        diagnosis=("tiny_lm:shared_caches", "tiny_lm:shared_cache")),
    Bug("tiny_lm", "first_cache_for_every_block", "gpt.py", LOOP,
        "            x = block(x, mask, rope=rope, cache=None if caches is None else caches[0])",
        "gives every block the first cache",
        diagnosis=("tiny_lm:shared_cache",)),
    Bug("tiny_lm", "no_causal_mask", "gpt.py", MASK, "        mask = None",
        "forgets the causal mask when there are no caches: every position sees the future",
        diagnosis=("tiny_lm:no_causal_mask",)),
    Bug("tiny_lm", "mask_with_caches", "gpt.py", MASK,
        "        mask = causal_mask(idx.size(1), device=idx.device)",
        "builds the causal mask with caches too, which the attention refuses",
        diagnosis=("tiny_lm:mask_with_cache",)),
    Bug("tiny_lm", "max_len_off_by_one", "gpt.py", "        if start + idx.size(1) > self.max_len:",
        "        if start + idx.size(1) >= self.max_len:",
        "rejects a sequence that exactly fills max_len",
        diagnosis=("tiny_lm:max_len_off_by_one",)),
    Bug("tiny_lm", "tied_embeddings", "gpt.py",
        "        self.head = nn.Linear(d_model, vocab_size, bias=False)",
        """        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight""",
        "ties the head's weight to the embedding's (GPT-2 style) although the contract's are separate",
        diagnosis=("tiny_lm:tied_to_head",)),
    Bug("tiny_lm", "head_with_bias", "gpt.py",
        "        self.head = nn.Linear(d_model, vocab_size, bias=False)",
        "        self.head = nn.Linear(d_model, vocab_size)",
        "keeps nn.Linear's default bias in the head",
        diagnosis=("tiny_lm:head_bias",)),
    Bug("tiny_lm", "scaled_embedding", "gpt.py", "        x = self.tok_emb(idx)  # (B, T, D)",
        "        x = self.tok_emb(idx) * self.tok_emb.embedding_dim ** 0.5  # (B, T, D)",
        "scales the embeddings by sqrt(d_model), as the 2017 Transformer does",
        diagnosis=("tiny_lm:scaled_embedding",)),
]

# A branch that reads another tensor in scope (mistakes.BLOCK_READ): held-out set 8's ffn_norm_reads_block_input
# and its siblings.
ATTN_LINE = "h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)"
BUGS += [
    Bug("tiny_lm", "ffn_norm_reads_block_input", "gpt.py", "return h + self.ffn(self.ffn_norm(h))",
        "return h + self.ffn(self.ffn_norm(x))",
        "the feed-forward normalises the block input x instead of h (a GPT-J-style parallel block by accident)",
        diagnosis=("tiny_lm:block_reads",)),
    Bug("tiny_lm", "ffn_not_normalised", "gpt.py", "return h + self.ffn(self.ffn_norm(h))", "return h + self.ffn(h)",
        "feeds h to the feed-forward without ffn_norm", diagnosis=("tiny_lm:block_reads",)),
    Bug("tiny_lm", "attention_not_normalised", "gpt.py", ATTN_LINE,
        "h = x + self.attn(x, mask, rope=rope, cache=cache)", "feeds x to the attention without attn_norm",
        diagnosis=("tiny_lm:block_reads",)),
    Bug("tiny_lm", "attention_without_residual", "gpt.py", ATTN_LINE,
        "h = self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)", "forgets the attention's residual",
        diagnosis=("tiny_lm:block_reads",)),
]
# Not in the catalogue yet: a TinyLM returning the logits of the last position only, return
# self.head(self.norm(x[:, -1:])), is named (the last_position_only variant), but its training check's message
# ("step 0: TinyLM(idx ...) returned ..., expected logits ...", tests/checklib/training/tiny_lm.py) is not
# translated, which selftests/test_i18n.py refuses for a catalogue bug.
BUGS += [
    Bug("tiny_lm", "one_block_repeated", "gpt.py",
        "self.blocks = nn.ModuleList(DecoderBlock(d_model, n_heads, n_kv_heads, d_ff) for _ in range(n_layers))",
        "self.blocks = nn.ModuleList([DecoderBlock(d_model, n_heads, n_kv_heads, d_ff)] * n_layers)",
        "repeats one DecoderBlock object n_layers times", diagnosis=("tiny_lm:shared_block",)),
    Bug("tiny_lm", "attn_norm_default_eps", "gpt.py",
        "self.attn_norm = RMSNorm(d_model, eps)", "self.attn_norm = RMSNorm(d_model)",
        "forgets to pass eps to the attention's RMSNorm (only a non-default eps shows it)",
        diagnosis=("tiny_lm:attn_norm_without_eps",)),
    Bug("tiny_lm", "norms_default_eps", "gpt.py",
        "self.attn_norm = RMSNorm(d_model, eps)\n        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, "
        "bias=False)\n        self.ffn_norm = RMSNorm(d_model, eps)",
        "self.attn_norm = RMSNorm(d_model)\n        self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, "
        "bias=False)\n        self.ffn_norm = RMSNorm(d_model)",
        "builds both norms with the default eps, whatever eps the block is given",
        diagnosis=("tiny_lm:norms_without_eps",)),
    Bug("tiny_lm", "attention_with_n_heads_kv", "gpt.py",
        "self.attn = GroupedQueryAttention(d_model, n_heads, n_kv_heads, bias=False)",
        "self.attn = GroupedQueryAttention(d_model, n_heads, n_heads, bias=False)",
        "ignores n_kv_heads and builds full multi-head attention in every block",
        diagnosis=("tiny_lm:kv_heads_not_passed",)),
    Bug("tiny_lm", "rope_head_dim_over_kv_heads", "gpt.py", "cos, sin = rope_angles(max_len, d_model // n_heads, rope_base)",
        "cos, sin = rope_angles(max_len, d_model // n_kv_heads, rope_base)",
        "sizes the RoPE tables by the key/value heads",
        diagnosis=("tiny_lm:rope_for_kv_heads",)),
    Bug("tiny_lm", "one_norm_for_both", "gpt.py", "self.ffn_norm = RMSNorm(d_model, eps)",
        "self.ffn_norm = self.attn_norm",
        "reuses the attention's RMSNorm before the feed-forward network, sharing one weight",
        diagnosis=("tiny_lm:one_norm_object",)),
    Bug("tiny_lm", "residual_in_place", "gpt.py",
        "h = x + self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)",
        "x += self.attn(self.attn_norm(x), mask, rope=rope, cache=cache)\n        h = x",
        "adds the attention branch into the caller's x in place (x += ...)",
        named_by="after DecoderBlock(8, 2, 1, 12)'s forward"),
    # Held-out set 14's start_from_number_of_caches: no check saw it (6 cached positions and a third of the
    # blocks' RoPE tables raise a ValueError of their own), until a fresh-caches prefill of max_len - 1.
    Bug("tiny_lm", "start_from_cache_count", "gpt.py", "start = 0 if caches is None else len(caches[0])",
        "start = 0 if caches is None else len(caches)", "takes the first position from the number of caches",
        diagnosis=("tiny_lm:start_from_cache_count",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): caches made once and handed out again, as a model that only ever
    # decodes one prompt may.
    Bug("tiny_lm", "caches_made_once", "gpt.py",
        "        return [KVCache() for _ in self.blocks]\n",
        "        if not hasattr(self, \"_caches\"):  # made once, on first use\n"
        "            self._caches = [KVCache() for _ in self.blocks]\n"
        "        return self._caches\n",
        "makes its caches once and hands out the same list from every call of new_caches, so a second prompt "
        "decoded through the same model goes on from the first one's keys and values",
        diagnosis=("tiny_lm:caches_made_once",)),
]
