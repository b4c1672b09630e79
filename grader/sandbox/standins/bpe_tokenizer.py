"""Stand-in for bpe_encoding: BPETokenizer (GPT-2's bpe(): the pair of lowest rank first, again and again)."""
from __future__ import annotations

import regex

_PAT = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


class BPETokenizer:
    def __init__(self, vocab, merges, special_tokens=()):
        self.vocab = dict(vocab)
        self.rank = {(a, b): r for r, (a, b) in enumerate(merges)}
        self.id_of = {}
        for i, b in sorted(self.vocab.items()):
            self.id_of.setdefault(b, i)
        self.special = sorted(special_tokens, key=len, reverse=True)
        for s in self.special:
            if s.encode("utf-8") not in self.id_of:
                raise ValueError(f"special token {s!r} is not in the vocabulary")
        self.cut = regex.compile("(" + "|".join(regex.escape(s) for s in self.special) + ")") if self.special else None

    def _bpe(self, token):
        parts = [token[i:i + 1] for i in range(len(token))]
        while len(parts) > 1:
            ranked = [(self.rank[p], p) for p in zip(parts, parts[1:]) if p in self.rank]
            if not ranked:
                break
            first, second = min(ranked)[1]
            out, i = [], 0
            while i < len(parts):
                if i + 1 < len(parts) and parts[i] == first and parts[i + 1] == second:
                    out.append(first + second)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            parts = out
        return parts

    def encode(self, text):
        pieces = self.cut.split(text) if self.cut else [text]
        ids = []
        for k, piece in enumerate(pieces):
            if k % 2:
                ids.append(self.id_of[piece.encode("utf-8")])
                continue
            for m in _PAT.finditer(piece):
                ids += [self.id_of[p] for p in self._bpe(m.group().encode("utf-8"))]
        return ids

    def decode(self, ids):
        missing = [i for i in ids if i not in self.vocab]
        if missing:
            raise ValueError(f"id {missing[0]} is not in the vocabulary")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
