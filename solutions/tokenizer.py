"""Byte-level BPE: training a tokenizer's merges, and encoding text with them.

Two components live here:

- ``bpe_training``: ``train_bpe``, which learns the merges from a text;
- ``bpe_encoding``: ``BPETokenizer``, which turns text into token ids and back.

Both split text the same way: at the special tokens first (longest first where
several start at one position), then each piece by GPT-2's pre-tokenizer pattern.
"""
from __future__ import annotations

from collections import Counter

import regex

# GPT-2's pre-tokenizer (tiktoken's gpt2 pat_str)
PAT = regex.compile(r"'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+")


def _split_special(text: str, special_tokens) -> list[tuple[str, bool]]:
    """The text cut at its special tokens: (piece, is_special) pairs, leftmost first, longest where several start."""
    if not special_tokens:
        return [(text, False)]
    alternatives = "|".join(regex.escape(s) for s in sorted(special_tokens, key=len, reverse=True))
    parts, start = [], 0
    for m in regex.finditer(alternatives, text):
        parts.append((text[start:m.start()], False))
        parts.append((m.group(), True))
        start = m.end()
    parts.append((text[start:], False))
    return [(piece, special) for piece, special in parts if piece]


def _pretokenize(text: str, special_tokens=()) -> list[bytes]:
    """Every pre-token of `text` as bytes (special tokens left out: nothing crosses them)."""
    return [m.group().encode("utf-8") for piece, special in _split_special(text, special_tokens) if not special
            for m in PAT.finditer(piece)]


def _merge(word: tuple[bytes, ...], pair: tuple[bytes, bytes]) -> tuple[bytes, ...]:
    """`word` with every occurrence of `pair` joined, left to right without overlap."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def train_bpe(text: str, vocab_size: int, special_tokens=()) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    """Learn byte-level BPE merges from `text` until the vocabulary holds `vocab_size` entries."""
    special_tokens = list(special_tokens)
    if vocab_size < 256 + len(special_tokens):
        raise ValueError(f"vocab_size {vocab_size} is below 256 bytes + {len(special_tokens)} special tokens")
    vocab = {i: bytes([i]) for i in range(256)}
    for s in special_tokens:
        vocab[len(vocab)] = s.encode("utf-8")
    words = Counter(tuple(bytes([b]) for b in p) for p in _pretokenize(text, special_tokens))
    merges = []
    while len(vocab) < vocab_size:
        counts = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                counts[pair] += n
        if not counts:
            break
        pair = max(counts, key=lambda p: (counts[p], p))  # the highest count; ties to the greater pair
        merges.append(pair)
        vocab[len(vocab)] = pair[0] + pair[1]
        new_words = Counter()
        for word, n in words.items():
            new_words[_merge(word, pair)] += n
        words = new_words
    return vocab, merges


class BPETokenizer:
    """Text to token ids and back, with a vocabulary and merges as `train_bpe` returns them."""

    def __init__(self, vocab: dict[int, bytes], merges, special_tokens=()) -> None:
        self.vocab = dict(vocab)
        self.ranks = {tuple(pair): i for i, pair in enumerate(merges)}
        self.ids: dict[bytes, int] = {}
        for i in sorted(self.vocab):  # the lowest id of each byte string
            self.ids.setdefault(self.vocab[i], i)
        self.special_tokens = list(special_tokens)
        for s in self.special_tokens:
            if s.encode("utf-8") not in self.ids:
                raise ValueError(f"special token {s!r} is not in the vocabulary")

    def encode(self, text: str) -> list[int]:
        def bpe(token: bytes) -> tuple[bytes, ...]:  # GPT-2's bpe(): merge the pair that came first in training
            word = tuple(bytes([b]) for b in token)
            while len(word) > 1:
                pair = min(zip(word, word[1:]), key=lambda p: self.ranks.get(p, float("inf")))
                if pair not in self.ranks:
                    break
                word = _merge(word, pair)
            return word

        ids = []
        for piece, special in _split_special(text, self.special_tokens):
            if special:
                ids.append(self.ids[piece.encode("utf-8")])
                continue
            for m in PAT.finditer(piece):
                ids.extend(self.ids[part] for part in bpe(m.group().encode("utf-8")))
        return ids

    def decode(self, ids: list[int]) -> str:
        for i in ids:
            if i not in self.vocab:
                raise ValueError(f"id {i} is not in the vocabulary")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
