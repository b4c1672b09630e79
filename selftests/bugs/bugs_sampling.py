from . import Bug

SCALE = "logits = logits / temperature"
TOP_K = "logits = logits.masked_fill(logits < kth, float(\"-inf\"))"
KTH = "        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)\n        " + TOP_K
ABOVE = "above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)  # (..., V)"
FILTER_BODY = """    logits = logits / temperature
    if top_k is not None and top_k < logits.size(-1):
        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1:  # top_p = 1 keeps all, even where 1 - p rounds to 1
        probs = logits.softmax(dim=-1)"""
FILTER_END = """
        # mass strictly more probable than each token: sum of p_j over p_j > p_i
        above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)  # (..., V)
        logits = logits.masked_fill(above >= top_p, float("-inf"))
    return logits
"""
DRAW = "probs = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).softmax(dim=-1)"
MULTINOMIAL = "return torch.multinomial(probs, 1, generator=generator).squeeze(-1)"
GREEDY = "    if temperature == 0:\n        return logits.argmax(dim=-1)\n"
STEP = "logits = model(step, caches=caches)[:, -1]  # (B, V)"
LENGTH = "if idx.size(1) + max_new_tokens > model.max_len:"

BUGS = [
    # filter_logits
    Bug("sampling", "temperature_multiplied", "sampling.py", SCALE, "logits = logits * temperature",
        "multiplies the logits by the temperature instead of dividing them",
        diagnosis=("sampling:temperature_times",)),
    Bug("sampling", "temperature_in_place", "sampling.py", SCALE, "logits /= temperature",
        "divides the caller's logits in place",
        diagnosis=("sampling:logits_divided_in_place",)),
    Bug("sampling", "temperature_after_filters", "sampling.py", FILTER_BODY + FILTER_END,
        (FILTER_BODY + FILTER_END).replace("    logits = logits / temperature\n", "").replace(
            "    return logits\n", "    return logits / temperature\n"),
        "applies the temperature after the filters, so top-p's probabilities ignore it",
        diagnosis=("sampling:temperature_last",)),
    Bug("sampling", "top_k_strict", "sampling.py", TOP_K, TOP_K.replace("logits < kth", "logits <= kth"),
        "keeps only the entries strictly above the top_k-th largest value",
        diagnosis=("sampling:topk_strict",)),
    Bug("sampling", "top_k_exact_indices", "sampling.py", KTH,
        "        top = logits.topk(top_k, dim=-1).indices\n"
        "        keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, top, True)\n"
        "        logits = logits.masked_fill(~keep, float(\"-inf\"))",
        "keeps exactly the top_k indices torch.topk returns, dropping entries tied at the boundary",
        diagnosis=("sampling:topk_exact",)),
    Bug("sampling", "top_p_cumsum_without_shift", "sampling.py", ABOVE, ABOVE.replace(
        "(probs.unsqueeze(-2) > probs.unsqueeze(-1))", "(probs.unsqueeze(-2) >= probs.unsqueeze(-1))"),
        "counts each token's own probability in the mass above it (a cumulative sum without the shift), "
        "removing the token that crosses top_p",
        diagnosis=("sampling:topp_inclusive",)),
    Bug("sampling", "top_p_unsorted", "sampling.py", ABOVE, "above = probs.cumsum(-1) - probs",
        "sums the probabilities in vocabulary order, without sorting them",
        diagnosis=("sampling:topp_unsorted",)),
    Bug("sampling", "top_p_sorted_ties", "sampling.py", ABOVE,
        "ordered, order = probs.sort(dim=-1, descending=True)\n"
        "        above = torch.empty_like(probs).scatter(-1, order, ordered.cumsum(-1) - ordered)",
        "sorts and takes the shifted cumulative sum but tells tied tokens apart, keeping only some of a tie",
        diagnosis=("sampling:topp_sorted_ties",)),
    Bug("sampling", "top_p_before_top_k", "sampling.py", FILTER_BODY,
        FILTER_BODY.replace("    logits = logits / temperature\n", "    logits = scaled = logits / temperature\n")
        .replace("probs = logits.softmax(dim=-1)", "probs = scaled.softmax(dim=-1)"),
        "computes top-p's probabilities before top-k removed tokens",
        diagnosis=("sampling:topp_before_topk",)),
    # sample_next_token
    Bug("sampling", "softmax_twice", "sampling.py", DRAW,
        DRAW.replace("filter_logits(logits,", "filter_logits(logits.softmax(dim=-1),"),
        "takes the softmax before filtering and again after",
        diagnosis=("sampling:softmax_twice",)),
    Bug("sampling", "multinomial_of_logits", "sampling.py", DRAW, DRAW.replace(".softmax(dim=-1)", ""),
        "hands the filtered logits to torch.multinomial without a softmax",
        diagnosis=("sampling:multinomial_of_logits",)),
    Bug("sampling", "global_generator", "sampling.py", MULTINOMIAL, "return torch.multinomial(probs, 1).squeeze(-1)",
        "draws without generator=, from torch's global random state",
        diagnosis=("sampling:global_randomness",)),
    Bug("sampling", "reseeds_global", "sampling.py", MULTINOMIAL,
        "torch.manual_seed(0)\n    return torch.multinomial(probs, 1).squeeze(-1)",
        "seeds torch's global generator at every call for reproducibility",
        diagnosis=("sampling:generator_ignored", "sampling:global_randomness")),
    Bug("sampling", "no_squeeze", "sampling.py", MULTINOMIAL, "return torch.multinomial(probs, 1, generator=generator)",
        "returns multinomial's (B, 1) instead of (B,)",
        diagnosis=("sampling:kept_dimension",)),
    Bug("sampling", "greedy_argmax_dim0", "sampling.py", GREEDY, GREEDY.replace("argmax(dim=-1)", "argmax(dim=0)"),
        "takes the greedy argmax over the batch dimension",
        diagnosis=("sampling:argmax_over_batch",)),
    Bug("sampling", "greedy_through_filter", "sampling.py", GREEDY, "",
        "forgets the greedy branch, so temperature 0 reaches filter_logits",
        diagnosis=("sampling:greedy_filters",)),
    # generate
    Bug("sampling", "refeeds_sequence_with_cache", "sampling.py", STEP, STEP.replace("model(step,", "model(out,"),
        "feeds the whole sequence at every step although the caches hold it",
        diagnosis=("sampling:sequence_refed",)),
    Bug("sampling", "no_cache", "sampling.py", STEP, STEP.replace("model(step, caches=caches)", "model(out)"),
        "runs the whole sequence through the model at every step, without caches",
        diagnosis=("sampling:no_caches",)),
    Bug("sampling", "new_token_without_cache", "sampling.py", STEP,
        STEP.replace("model(step, caches=caches)", "model(step)"),
        "feeds the new token alone but forgets to pass the caches",
        diagnosis=("sampling:newest_token_without_caches",)),
    Bug("sampling", "first_position_logits", "sampling.py", STEP, STEP.replace("[:, -1]", "[:, 0]"),
        "chooses each token from the first position's logits",
        diagnosis=("sampling:first_position_logits",)),
    Bug("sampling", "max_len_rejects_exact_fit", "sampling.py", LENGTH, LENGTH.replace(">", ">="),
        "rejects T + max_new_tokens == max_len, which fits",
        diagnosis=("sampling:length_at_max_len",)),
    Bug("sampling", "max_len_one_past", "sampling.py", LENGTH, LENGTH.replace("model.max_len:", "model.max_len + 1:"),
        "accepts one token more than max_len, since the last token is never fed",
        diagnosis=("sampling:length_past_max_len",)),
    Bug("sampling", "caches_kept_on_the_model", "sampling.py", "    caches = model.new_caches()\n",
        "    caches = getattr(model, \"_caches\", None) or model.new_caches()\n    model._caches = caches\n",
        "makes the caches once and keeps them on the model, so a second generate continues the first",
        diagnosis=("sampling:old_caches_reused",)),
    Bug("sampling", "returns_new_tokens_only", "sampling.py", "    return out\n", "    return out[:, idx.size(1):]\n",
        "returns only the new tokens, without the prompt",
        diagnosis=("sampling:new_tokens_only",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("sampling", "kth_without_keepdim", "sampling.py", "kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)",
        "kth = logits.topk(top_k, dim=-1).values[..., -1]  # (..., 1)",
        "takes the top_k-th value without keeping its dimension",
        diagnosis=("sampling:kth_without_its_dimension",)),
]

# A member of the fitted top-k family (mistakes.TOP_K_OFF_BY_ONE) that no single entry names.
BUGS += [
    Bug("sampling", "top_k_keeps_one_more", "sampling.py", "kth = logits.topk(top_k, dim=-1).values[..., -1:]",
        "kth = logits.topk(top_k + 1, dim=-1).values[..., -1:]",
        "takes the (top_k + 1)-th value as the threshold, keeping one entry too many",
        diagnosis=("sampling:top_k_off_by_one",)),
]

# A default that differs from the contract's (mistakes.DEFAULT_DIFFERS) and caches made anew at every step:
# held-out set 8's generate_samples_by_default and new_caches_every_step, and siblings.
BUGS += [
    Bug("sampling", "generate_samples_by_default", "sampling.py",
        "    max_new_tokens: int,\n    *,\n    temperature: float = 0.0,",
        "    max_new_tokens: int,\n    *,\n    temperature: float = 1.0,",
        "generate's temperature defaults to 1.0 (sampling) instead of 0.0 (greedy)",
        diagnosis=("sampling:default_differs",)),
    Bug("sampling", "generate_chat_temperature_default", "sampling.py",
        "    max_new_tokens: int,\n    *,\n    temperature: float = 0.0,",
        "    max_new_tokens: int,\n    *,\n    temperature: float = 0.7,",
        "generate's temperature defaults to a chat model's 0.7 instead of 0.0 (greedy)",
        diagnosis=("sampling:default_differs",)),
    Bug("sampling", "new_caches_every_step", "sampling.py",
        "    caches = model.new_caches()\n    out, step = idx, idx\n    for _ in range(max_new_tokens):\n",
        "    out, step = idx, idx\n    for _ in range(max_new_tokens):\n        caches = model.new_caches()\n",
        "generate makes fresh caches inside the loop, so each new token sees no context",
        diagnosis=("sampling:fresh_caches_newest_token",)),
]
BUGS += [
    Bug("sampling", "softmax_over_rows", "sampling.py",
        "probs = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).softmax(dim=-1)",
        "probs = filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p).softmax(dim=0)",
        "takes the softmax over the batch (dim 0) instead of the vocabulary",
        diagnosis=("sampling:softmax_over_rows",)),
]

BUGS += [
    Bug("sampling", "draw_squeezed_whole", "sampling.py",
        "return torch.multinomial(probs, 1, generator=generator).squeeze(-1)",
        "return torch.multinomial(probs, 1, generator=generator).squeeze()",
        "squeezes every axis of size 1: a batch of one comes back 0-dim instead of (1,)",
        diagnosis=("general:squeezed",)),
]

# A filter done in sorted order and returned so (mistakes.SORTED_ORDER): held-out set 10's top_p_unsorted (top-p),
# and the same with top-k.
TOP_P_BODY = """        probs = logits.softmax(dim=-1)
        # mass strictly more probable than each token: sum of p_j over p_j > p_i
        above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)  # (..., V)
        logits = logits.masked_fill(above >= top_p, float("-inf"))"""
BUGS += [
    Bug("sampling", "top_p_left_sorted", "sampling.py", TOP_P_BODY,
        """        sorted_logits, sorted_idx = torch.sort(logits, descending=True, dim=-1)
        sorted_probs = sorted_logits.softmax(dim=-1)
        remove = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p
        logits = sorted_logits.masked_fill(remove, float("-inf"))""",
        "filters top-p in sorted order and returns the sorted logits, never scattering them back",
        diagnosis=("sampling:sorted_order",)),
    Bug("sampling", "top_k_left_sorted", "sampling.py",
        """        kth = logits.topk(top_k, dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))""",
        """        logits = logits.sort(dim=-1, descending=True).values
        logits[..., top_k:] = float("-inf")""",
        "keeps the first top_k of the sorted logits and returns them in sorted order",
        diagnosis=("sampling:sorted_order",)),
    Bug("sampling", "top_p_mask_left_sorted", "sampling.py",
        "above = (probs.unsqueeze(-2) * (probs.unsqueeze(-2) > probs.unsqueeze(-1))).sum(-1)  # (..., V)",
        "sorted_probs = probs.sort(dim=-1, descending=True).values\n"
        "        above = sorted_probs.cumsum(-1) - sorted_probs  # (..., V), in sorted order",
        "works the top-p mask out on the sorted probabilities and applies it to the logits unsorted",
        diagnosis=("sampling:sorted_mask_unsorted",)),
    Bug("sampling", "top_k_keeps_one_less", "sampling.py", "kth = logits.topk(top_k, dim=-1).values[..., -1:]",
        "kth = logits.topk(top_k - 1, dim=-1).values[..., -1:]",
        "takes the (top_k - 1)-th value as the threshold, keeping one entry too few",
        diagnosis=("sampling:top_k_off_by_one",)),
    Bug("sampling", "greedy_argmax_flat", "sampling.py", "return logits.argmax(dim=-1)",
        "return logits.argmax()",
        "takes argmax() of the whole batch, without a dim",
        diagnosis=("sampling:argmax_flat",)),
    Bug("sampling", "new_token_prepended", "sampling.py", "out = torch.cat([out, step], dim=1)",
        "out = torch.cat([step, out], dim=1)",
        "puts each new token in front of the sequence",
        diagnosis=("sampling:new_tokens_prepended",)),
    Bug("sampling", "top_k_filled_with_zero", "sampling.py",
        'logits = logits.masked_fill(logits < kth, float("-inf"))', "logits = logits.masked_fill(logits < kth, 0.0)",
        "sets the logits outside the top k to 0, taking 0 for 'removed'",
        diagnosis=("sampling:finite_fill",)),
    # Held-out set 14's top_k_above_vocab_unguarded.
    Bug("sampling", "top_k_above_vocab", "sampling.py", "    if top_k is not None and top_k < logits.size(-1):",
        "    if top_k is not None:", "calls topk(top_k) even when top_k is larger than the vocabulary",
        diagnosis=("sampling:top_k_above_vocab",)),
]
