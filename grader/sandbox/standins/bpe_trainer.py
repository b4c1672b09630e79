"""Stand-in for bpe_training: train_bpe (byte-level BPE, CS336's rules; pair counts kept up to date per merge)."""
from __future__ import annotations

import regex

_PAT = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def _pretokens(text, special_tokens):
    if special_tokens:
        cut = regex.compile("|".join(regex.escape(s) for s in sorted(special_tokens, key=len, reverse=True)))
        pieces = cut.split(text)
    else:
        pieces = [text]
    for piece in pieces:
        for m in _PAT.finditer(piece):
            yield m.group().encode("utf-8")


def train_bpe(text, vocab_size, special_tokens=()):
    special_tokens = list(special_tokens)
    if vocab_size < 256 + len(special_tokens):
        raise ValueError("vocab_size is smaller than 256 + the number of special tokens")
    vocab = {b: bytes([b]) for b in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    counts: dict[tuple, int] = {}
    for token in _pretokens(text, special_tokens):
        word = tuple(token[i:i + 1] for i in range(len(token)))
        counts[word] = counts.get(word, 0) + 1
    words = [list(w) for w in counts]
    freq = list(counts.values())
    pairs: dict[tuple[bytes, bytes], int] = {}
    for w, n in zip(words, freq):
        for pair in zip(w, w[1:]):
            pairs[pair] = pairs.get(pair, 0) + n
    merges = []
    while len(vocab) < vocab_size:
        live = [(n, p) for p, n in pairs.items() if n > 0]
        if not live:
            break
        _, best = max(live)
        merges.append(best)
        joined = best[0] + best[1]
        vocab[len(vocab)] = joined
        for w, n in zip(words, freq):
            if len(w) < 2 or best[0] not in w:
                continue
            for pair in zip(w, w[1:]):
                pairs[pair] -= n
            i, out = 0, []
            while i < len(w):
                if i + 1 < len(w) and w[i] == best[0] and w[i + 1] == best[1]:
                    out.append(joined)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            w[:] = out
            for pair in zip(w, w[1:]):
                pairs[pair] = pairs.get(pair, 0) + n
    return vocab, merges
