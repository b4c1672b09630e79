from . import Bug

PICK = 'pair = min(zip(word, word[1:]), key=lambda p: self.ranks.get(p, float("inf")))'
TABLE = "        for i in sorted(self.vocab):  # the lowest id of each byte string"
SPLIT = "        for piece, special in _split_special(text, self.special_tokens):"
PIECES = ('            for m in PAT.finditer(piece):\n'
          '                ids.extend(self.ids[part] for part in bpe(m.group().encode("utf-8")))')
DECODE = '        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")'
CHECK_ID = ('        for i in ids:\n            if i not in self.vocab:\n'
            '                raise ValueError(f"id {i} is not in the vocabulary")\n')
CHECK_SPECIAL = ('            if s.encode("utf-8") not in self.ids:\n'
                 '                raise ValueError(f"special token {s!r} is not in the vocabulary")')

BUGS = [
    Bug("bpe_encoding", "latest_merge_first", "tokenizer.py", PICK,
        'pair = max(zip(word, word[1:]), key=lambda p: self.ranks.get(p, -1))',
        "merges the pair of the highest rank (the latest merge) first",
        diagnosis=("bpe_encoding:latest_merge_first",)),
    Bug("bpe_encoding", "leftmost_ranked_pair", "tokenizer.py", PICK,
        "pair = next((p for p in zip(word, word[1:]) if p in self.ranks), None)",
        "merges the leftmost pair that has a rank instead of the lowest-ranked one",
        diagnosis=("bpe_encoding:leftmost_pair_first",)),
    Bug("bpe_encoding", "reversed_ranks", "tokenizer.py",
        "        self.ranks = {tuple(pair): i for i, pair in enumerate(merges)}",
        "        self.ranks = {tuple(pair): i for i, pair in enumerate(reversed(merges))}",
        "numbers the merges from the last one, so the latest merge has the lowest rank",
        diagnosis=("bpe_encoding:latest_merge_first",)),
    Bug("bpe_encoding", "merge_from_the_right", "tokenizer.py", "                word = _merge(word, pair)",
        "                w, i = list(word), len(word) - 2\n"
        "                while i >= 0:\n"
        "                    if (w[i], w[i + 1]) == pair:\n"
        "                        w[i:i + 2] = [w[i] + w[i + 1]]\n"
        "                        i -= 2\n"
        "                    else:\n"
        "                        i -= 1\n"
        "                word = tuple(w)",
        "merges the pair scanning from the right end of the pre-token",
        diagnosis=("bpe_encoding:merged_right_to_left",)),
    Bug("bpe_encoding", "highest_duplicate_id", "tokenizer.py", TABLE,
        "        for i in sorted(self.vocab, reverse=True):",
        "keeps the highest id where two ids hold the same bytes",
        diagnosis=("bpe_encoding:highest_duplicate_id",)),
    Bug("bpe_encoding", "inverted_dict", "tokenizer.py",
        "        self.ids: dict[bytes, int] = {}\n" + TABLE + "\n            self.ids.setdefault(self.vocab[i], i)",
        "        self.ids: dict[bytes, int] = {v: k for k, v in self.vocab.items()}",
        "inverts the vocab with a dict comprehension, so the last (highest) id of duplicate bytes wins",
        diagnosis=("bpe_encoding:highest_duplicate_id",)),
    Bug("bpe_encoding", "specials_in_given_order", "tokenizer.py", SPLIT,
        "        pieces = regex.split(\"(\" + \"|\".join(map(regex.escape, self.special_tokens)) + \")\", text) "
        "if self.special_tokens else [text]\n"
        "        for piece, special in ((p, k % 2 == 1) for k, p in enumerate(pieces)):",
        "cuts at the special tokens in the order given, so the shorter of two wins where both start",
        diagnosis=("bpe_encoding:shorter_special_first",)),
    Bug("bpe_encoding", "specials_not_split", "tokenizer.py", SPLIT,
        "        for piece, special in _split_special(text, ()):",
        "never cuts the text at its special tokens: they are pre-tokenized and merged as text",
        diagnosis=("bpe_encoding:specials_encoded_as_text",)),
    Bug("bpe_encoding", "no_pretokenizer", "tokenizer.py", PIECES,
        '            ids.extend(self.ids[part] for part in bpe(piece.encode("utf-8")))',
        "merges each piece between special tokens whole, without pre-tokenizing it",
        diagnosis=("bpe_encoding:merges_cross_pretokens",)),
    Bug("bpe_encoding", "split_words_and_spaces", "tokenizer.py", PIECES,
        '            for m in regex.finditer(r"\\S+|\\s+", piece):\n'
        '                ids.extend(self.ids[part] for part in bpe(m.group().encode("utf-8")))',
        "pre-tokenizes with \\S+|\\s+ instead of GPT-2's pattern",
        diagnosis=("bpe_encoding:simplified_pattern",)),
    Bug("bpe_encoding", "str_split", "tokenizer.py", PIECES,
        '            for w in piece.split():\n'
        '                ids.extend(self.ids[part] for part in bpe(w.encode("utf-8")))',
        "pre-tokenizes with str.split(), dropping the whitespace",
        diagnosis=("bpe_encoding:whitespace_dropped",)),
    Bug("bpe_encoding", "whole_pretoken_first", "tokenizer.py", PIECES,
        '            for m in PAT.finditer(piece):\n'
        '                data = m.group().encode("utf-8")\n'
        '                ids.extend([self.ids[data]] if data in self.ids else (self.ids[p] for p in bpe(data)))',
        "looks the whole pre-token up in the vocab first, merging only where it is not there",
        diagnosis=("bpe_encoding:whole_pretoken_lookup",)),
    Bug("bpe_encoding", "no_merge_loop", "tokenizer.py",
        "            word = tuple(bytes([b]) for b in token)\n            while len(word) > 1:",
        "            word = tuple(bytes([b]) for b in token)\n            while False:",
        "never applies the merges: every pre-token stays single bytes",
        diagnosis=("bpe_encoding:no_merges",)),
    Bug("bpe_encoding", "special_id_256", "tokenizer.py", '                ids.append(self.ids[piece.encode("utf-8")])',
        "                ids.append(256 + self.special_tokens.index(piece))",
        "gives special token i the id 256 + i instead of looking it up in the vocab",
        diagnosis=("bpe_encoding:special_ids_from_256",)),
    Bug("bpe_encoding", "ids_from_ranks", "tokenizer.py", PIECES,
        '            for m in PAT.finditer(piece):\n'
        '                ids.extend(part[0] if len(part) == 1 else 256 + len(self.special_tokens) + '
        'next(r for p, r in self.ranks.items() if p[0] + p[1] == part)\n'
        '                           for part in bpe(m.group().encode("utf-8")))',
        "computes a merged piece's id from its merge's rank instead of looking its bytes up in the vocab",
        diagnosis=("bpe_encoding:ids_from_ranks",)),
    Bug("bpe_encoding", "strict_decode", "tokenizer.py", DECODE,
        '        return b"".join(self.vocab[i] for i in ids).decode("utf-8")',
        "decodes with errors=\"strict\", which raises on half a character",
        diagnosis=("bpe_encoding:strict_decode",)),
    Bug("bpe_encoding", "ignore_decode", "tokenizer.py", DECODE,
        '        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="ignore")',
        "decodes with errors=\"ignore\", dropping invalid bytes",
        diagnosis=("bpe_encoding:decode_drops_invalid",)),
    Bug("bpe_encoding", "decode_each_token", "tokenizer.py", DECODE,
        '        return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)',
        "decodes each token's bytes on its own, breaking characters split across tokens",
        diagnosis=("bpe_encoding:decode_per_token",)),
    Bug("bpe_encoding", "decode_returns_bytes", "tokenizer.py", DECODE,
        '        return b"".join(self.vocab[i] for i in ids)',
        "returns the joined bytes without decoding them",
        diagnosis=("bpe_encoding:decode_returns_bytes",)),
    Bug("bpe_encoding", "no_id_check", "tokenizer.py", CHECK_ID, "",
        "does not check the ids, so an unknown one raises KeyError",
        named_by="expected a ValueError"),
    Bug("bpe_encoding", "no_special_check", "tokenizer.py", CHECK_SPECIAL,
        "            pass",
        "does not check that the special tokens are in the vocab",
        named_by="expected a ValueError"),
    Bug("bpe_encoding", "special_as_str", "tokenizer.py", CHECK_SPECIAL,
        '            if s not in self.ids:\n'
        '                raise ValueError(f"special token {s!r} is not in the vocabulary")',
        "looks the special token up as a str among byte strings, so every special token is refused",
        diagnosis=("general:own_check_too_strict",)),
    Bug("bpe_encoding", "special_checked_in_keys", "tokenizer.py", CHECK_SPECIAL,
        '            if s.encode("utf-8") not in self.vocab:\n'
        '                raise ValueError(f"special token {s!r} is not in the vocabulary")',
        "looks the special token's bytes up among the vocab's ids instead of its values",
        diagnosis=("general:own_check_too_strict",)),
]
