"""A correct alternative for bpe_training and bpe_encoding, written otherwise than the reference: the trainer keeps
its pair counts and, for each pair, the pre-tokens that hold it, and updates only those after a merge (as CS336's
fast trainers do); the encoder merges with a heap of (rank, position) over a linked list of tokens (as Hugging
Face's BPE model does), its special tokens found by scanning for the longest at each position."""
from __future__ import annotations

import heapq
from collections import Counter, defaultdict

import regex

PAT = regex.compile(r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def _pieces(text: str, special_tokens) -> list[tuple[str, bool]]:
    """(piece, is_special), scanning each position for the longest special token that starts there."""
    longest_first = sorted(set(special_tokens), key=len, reverse=True)
    out, start, i = [], 0, 0
    while i < len(text):
        hit = next((s for s in longest_first if s and text.startswith(s, i)), None)
        if hit is None:
            i += 1
            continue
        out += [(text[start:i], False), (hit, True)]
        i = start = i + len(hit)
    out.append((text[start:], False))
    return [(p, s) for p, s in out if p]


def train_bpe(text: str, vocab_size: int, special_tokens=()) -> tuple[dict[int, bytes], list[tuple[bytes, bytes]]]:
    if vocab_size < 256 + len(special_tokens):
        raise ValueError("vocab_size must leave room for the 256 bytes and the special tokens")
    vocab = {i: bytes([i]) for i in range(256)}
    for token in special_tokens:
        vocab[len(vocab)] = token.encode("utf-8")
    freq = Counter(m.group().encode("utf-8") for piece, special in _pieces(text, special_tokens) if not special
                   for m in PAT.finditer(piece))
    words = [[bytes([b]) for b in w] for w in freq]
    counts = [freq[w] for w in freq]
    pair_count: Counter = Counter()
    holders: dict[tuple[bytes, bytes], set[int]] = defaultdict(set)
    for k, w in enumerate(words):
        for pair in zip(w, w[1:]):
            pair_count[pair] += counts[k]
            holders[pair].add(k)
    merges = []
    while len(vocab) < vocab_size:
        pair_count += Counter()  # drops the pairs whose count fell to 0
        if not pair_count:
            break
        top = max(pair_count.values())
        best = max(p for p, n in pair_count.items() if n == top)
        merges.append(best)
        vocab[len(vocab)] = best[0] + best[1]
        for k in list(holders.pop(best, ())):
            w = words[k]
            for pair in zip(w, w[1:]):
                pair_count[pair] -= counts[k]
            merged, i = [], 0
            while i < len(w):
                if w[i:i + 2] == list(best):
                    merged.append(best[0] + best[1])
                    i += 2
                else:
                    merged.append(w[i])
                    i += 1
            words[k] = merged
            for pair in zip(merged, merged[1:]):
                pair_count[pair] += counts[k]
                holders[pair].add(k)
    return vocab, merges


class BPETokenizer:
    def __init__(self, vocab: dict[int, bytes], merges, special_tokens=()) -> None:
        self.vocab = dict(vocab)
        self.rank = {(a, b): r for r, (a, b) in enumerate(merges)}
        self.lookup: dict[bytes, int] = {}
        for i in sorted(self.vocab, reverse=True):  # lower ids overwrite higher ones
            self.lookup[self.vocab[i]] = i
        self.special_tokens = tuple(special_tokens)
        missing = [s for s in self.special_tokens if s.encode("utf-8") not in self.lookup]
        if missing:
            raise ValueError(f"special tokens missing from vocab: {missing}")

    def _merge_word(self, data: bytes) -> list[bytes]:
        parts: list[bytes | None] = [data[i:i + 1] for i in range(len(data))]
        nxt = list(range(1, len(parts))) + [-1]
        prv = [-1] + list(range(len(parts) - 1))
        heap = [(self.rank[(parts[i], parts[i + 1])], i) for i in range(len(parts) - 1)
                if (parts[i], parts[i + 1]) in self.rank]
        heapq.heapify(heap)
        while heap:
            r, i = heapq.heappop(heap)
            j = nxt[i] if parts[i] is not None else -1
            if j == -1 or self.rank.get((parts[i], parts[j])) != r:
                continue  # stale: this position changed since it was pushed
            parts[i] += parts[j]
            parts[j] = None
            nxt[i] = nxt[j]
            if nxt[j] != -1:
                prv[nxt[j]] = i
            if prv[i] != -1 and (parts[prv[i]], parts[i]) in self.rank:
                heapq.heappush(heap, (self.rank[(parts[prv[i]], parts[i])], prv[i]))
            if nxt[i] != -1 and (parts[i], parts[nxt[i]]) in self.rank:
                heapq.heappush(heap, (self.rank[(parts[i], parts[nxt[i]])], i))
        return [p for p in parts if p is not None]

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece, special in _pieces(text, self.special_tokens):
            if special:
                ids.append(self.lookup[piece.encode("utf-8")])
            else:
                for m in PAT.finditer(piece):
                    ids += [self.lookup[p] for p in self._merge_word(m.group().encode("utf-8"))]
        return ids

    def decode(self, ids: list[int]) -> str:
        unknown = [i for i in ids if i not in self.vocab]
        if unknown:
            raise ValueError(f"ids not in vocab: {unknown}")
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
