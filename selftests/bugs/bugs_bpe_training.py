from . import Bug

PICK = "pair = max(counts, key=lambda p: (counts[p], p))  # the highest count; ties to the greater pair"
COUNT = "            for pair in zip(word, word[1:]):\n                counts[pair] += n"
PRETOKENS = ('    return [m.group().encode("utf-8") for piece, special in _split_special(text, special_tokens) if not special\n'
             '            for m in PAT.finditer(piece)]')
WORDS = 'words = Counter(tuple(bytes([b]) for b in p) for p in _pretokenize(text, special_tokens))'
LOOP = "    while len(vocab) < vocab_size:"
REWRITE = "        for word, n in words.items():\n            new_words[_merge(word, pair)] += n"

BUGS = [
    Bug("bpe_training", "min_tie_break", "tokenizer.py", PICK,
        "pair = min(counts, key=lambda p: (-counts[p], p))",
        "breaks ties between equal counts with the smallest pair",
        diagnosis=("bpe_training:min_tie_break",)),
    Bug("bpe_training", "count_only", "tokenizer.py", PICK,
        "pair = max(counts, key=counts.get)",
        "takes the max of the counts alone, so a tie goes to the pair counted first",
        diagnosis=("bpe_training:first_seen_tie_break",)),
    Bug("bpe_training", "most_common", "tokenizer.py", PICK,
        "pair = counts.most_common(1)[0][0]",
        "takes Counter.most_common(1), whose ties go to the pair counted first",
        diagnosis=("bpe_training:first_seen_tie_break",)),
    Bug("bpe_training", "max_of_items", "tokenizer.py", PICK,
        "pair = max(counts.items(), key=lambda kv: kv[1])[0]",
        "takes the max of the (pair, count) items by count alone, so a tie goes to the pair counted first",
        diagnosis=("bpe_training:first_seen_tie_break",)),
    Bug("bpe_training", "sorted_ascending_pairs", "tokenizer.py", PICK,
        "pair = sorted(counts, key=lambda p: (-counts[p], p))[0]",
        "sorts by descending count and then ascending pair, so a tie goes to the smallest pair",
        diagnosis=("bpe_training:min_tie_break",)),
    Bug("bpe_training", "run_counted_once", "tokenizer.py", COUNT,
        "            i = 0\n"
        "            while i < len(word) - 1:\n"
        "                counts[word[i], word[i + 1]] += n\n"
        "                i += 2 if i + 2 < len(word) and word[i] == word[i + 1] == word[i + 2] else 1",
        "skips a position inside a run so that b'aaa' holds (a, a) once",
        diagnosis=("bpe_training:overlaps_not_counted",)),
    Bug("bpe_training", "set_of_pairs", "tokenizer.py", COUNT,
        "            for pair in set(zip(word, word[1:])):\n                counts[pair] += n",
        "counts the set of a pre-token's pairs, so a pair that occurs twice in it counts once",
        diagnosis=("bpe_training:pairs_counted_once_per_pretoken",)),
    Bug("bpe_training", "count_not_weighted", "tokenizer.py", COUNT,
        "            for pair in zip(word, word[1:]):\n                counts[pair] += 1",
        "adds 1 per distinct pre-token instead of its number of occurrences",
        diagnosis=("bpe_training:pretokens_not_weighted",)),
    Bug("bpe_training", "no_pretokenizer", "tokenizer.py", PRETOKENS,
        '    return [piece.encode("utf-8") for piece, special in _split_special(text, special_tokens) if not special]',
        "never pre-tokenizes, so pairs cross words and whitespace",
        diagnosis=("bpe_training:pairs_cross_pretokens",)),
    Bug("bpe_training", "specials_not_removed", "tokenizer.py", WORDS,
        'words = Counter(tuple(bytes([b]) for b in p) for p in _pretokenize(text))',
        "pre-tokenizes the text without cutting it at the special tokens",
        diagnosis=("bpe_training:specials_trained_on",)),
    Bug("bpe_training", "specials_in_given_order", "tokenizer.py", PRETOKENS,
        '    pieces = regex.split("|".join(regex.escape(s) for s in special_tokens), text) if special_tokens else [text]\n'
        '    return [m.group().encode("utf-8") for piece in pieces for m in PAT.finditer(piece)]',
        "cuts at the special tokens in the order given, so the shorter of two wins where both start",
        diagnosis=("bpe_training:shortest_special_first",)),
    Bug("bpe_training", "split_words_and_spaces", "tokenizer.py", PRETOKENS,
        '    return [m.group().encode("utf-8") for piece, special in _split_special(text, special_tokens) if not special\n'
        '            for m in regex.finditer(r"\\S+|\\s+", piece)]',
        "pre-tokenizes with \\S+|\\s+ instead of GPT-2's pattern",
        diagnosis=("bpe_training:simplified_pattern",)),
    Bug("bpe_training", "str_split", "tokenizer.py", PRETOKENS,
        '    return [w.encode("utf-8") for piece, special in _split_special(text, special_tokens) if not special\n'
        '            for w in piece.split()]',
        "pre-tokenizes with str.split(), dropping the whitespace",
        diagnosis=("bpe_training:whitespace_dropped",)),
    Bug("bpe_training", "merge_from_the_right", "tokenizer.py", REWRITE,
        "        for word, n in words.items():\n"
        "            w, i = list(word), len(word) - 2\n"
        "            while i >= 0:\n"
        "                if (w[i], w[i + 1]) == pair:\n"
        "                    w[i:i + 2] = [w[i] + w[i + 1]]\n"
        "                    i -= 2\n"
        "                else:\n"
        "                    i -= 1\n"
        "            new_words[tuple(w)] += n",
        "replaces the pair scanning from the right end of each pre-token",
        diagnosis=("bpe_training:merged_right_to_left",)),
    Bug("bpe_training", "merge_first_occurrence", "tokenizer.py", REWRITE,
        "        for word, n in words.items():\n"
        "            i = next((i for i in range(len(word) - 1) if (word[i], word[i + 1]) == pair), None)\n"
        "            new_words[word if i is None else word[:i] + (word[i] + word[i + 1],) + word[i + 2:]] += n",
        "replaces only the first occurrence of the pair in each pre-token",
        diagnosis=("bpe_training:merged_first_only",)),
    Bug("bpe_training", "specials_deleted", "tokenizer.py", "    " + WORDS,
        "    for s in sorted(special_tokens, key=len, reverse=True):\n"
        "        text = text.replace(s, \"\")\n"
        "    words = Counter(tuple(bytes([b]) for b in p) for p in _pretokenize(text))",
        "deletes the special tokens from the text, joining the pieces around them",
        diagnosis=("bpe_training:specials_deleted",)),
    Bug("bpe_training", "merges_ignore_specials", "tokenizer.py", LOOP,
        "    while len(merges) < vocab_size - 256:",
        "learns vocab_size - 256 merges, forgetting the special tokens' ids",
        diagnosis=("bpe_training:specials_not_counted",)),
    Bug("bpe_training", "one_merge_short", "tokenizer.py", LOOP,
        "    while len(vocab) < vocab_size - 1:",
        "stops one merge early",
        diagnosis=("bpe_training:one_merge_short",)),
    Bug("bpe_training", "one_merge_over", "tokenizer.py", LOOP,
        "    while len(vocab) <= vocab_size:",
        "learns one merge too many",
        diagnosis=("bpe_training:one_merge_over",)),
    Bug("bpe_training", "characters", "tokenizer.py", WORDS,
        'words = Counter(tuple(c.encode("utf-8") for c in p.decode("utf-8")) for p in _pretokenize(text, special_tokens))',
        "starts from each pre-token's characters instead of its bytes",
        diagnosis=("bpe_training:characters_not_bytes",)),
    Bug("bpe_training", "stops_at_one", "tokenizer.py", "        if not counts:\n            break\n        pair = max",
        "        if not counts or max(counts.values()) < 2:\n            break\n        pair = max",
        "stops when the most frequent pair occurs only once",
        diagnosis=("bpe_training:stops_at_count_one",)),
    Bug("bpe_training", "vocab_holds_pairs", "tokenizer.py", "vocab[len(vocab)] = pair[0] + pair[1]",
        "vocab[len(vocab)] = pair",
        "stores the merged pair itself in the vocab instead of its joined bytes",
        named_by="the vocab is not a dict[int, bytes]"),
    Bug("bpe_training", "merges_as_lists", "tokenizer.py", "        merges.append(pair)\n",
        "        merges.append(list(pair))\n",
        "returns each merge as a list",
        named_by="the merges are not a list of (bytes, bytes) tuples"),
    Bug("bpe_training", "no_check_for_specials", "tokenizer.py", "    if vocab_size < 256 + len(special_tokens):",
        "    if vocab_size < 256:",
        "checks vocab_size against 256 only, forgetting the special tokens",
        named_by="expected a ValueError"),
    Bug("bpe_training", "check_too_strict", "tokenizer.py", "    if vocab_size < 256 + len(special_tokens):",
        "    if vocab_size <= 256 + len(special_tokens):",
        "refuses a vocab_size with no room for merges, which the contract accepts",
        diagnosis=("general:own_check_too_strict",)),
]
