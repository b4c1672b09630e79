"""The checks' own byte-level BPE, written plainly (never from solutions/): the contract's split of a text, a
trainer that recounts every pair after each merge, and GPT-2's `bpe()` for encoding. Each takes switches that
the known mistakes of bpe_training and bpe_encoding turn on (mistakes/bpe_training.py, mistakes/bpe_encoding.py),
so that one plain implementation is both the reference and every mistake's model."""
from __future__ import annotations

import functools

import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def split_at_specials(text: str, specials, shortest_first: bool = False) -> list[tuple[str, bool]]:
    """(piece, is_special) in order: scanning left to right, at each position the longest special token that
    starts there (the shortest, with `shortest_first`), else one character of text."""
    order = sorted(specials, key=len, reverse=not shortest_first)
    pieces: list[tuple[str, bool]] = []
    text_start, i = 0, 0
    while i < len(text):
        hit = next((s for s in order if s and text.startswith(s, i)), None)
        if hit is None:
            i += 1
            continue
        if text_start < i:
            pieces.append((text[text_start:i], False))
        pieces.append((hit, True))
        i += len(hit)
        text_start = i
    if text_start < len(text):
        pieces.append((text[text_start:], False))
    return pieces


def pretokens(text: str, specials=(), *, pattern: str = GPT2_PATTERN, shortest_first: bool = False,
              split_specials: bool = True, whole_pieces: bool = False) -> list[list[str]]:
    """Each piece between special tokens as its list of pre-tokens (strings); `whole_pieces`: no pre-tokenizer."""
    pieces = split_at_specials(text, specials, shortest_first) if split_specials else [(text, False)]
    out = []
    for piece, special in pieces:
        if special:
            continue
        out.append([piece] if whole_pieces else [m.group() for m in regex.finditer(pattern, piece)])
    return out


def join_pair(word: list[bytes], pair: tuple[bytes, bytes], right_to_left: bool = False,
              first_only: bool = False) -> list[bytes]:
    """`word` with `pair` merged: left to right without overlap (the contract), or from the right, or at its first
    occurrence only."""
    if right_to_left:
        return _right_to_left(word, pair)
    out, i, done = [], 0, False
    while i < len(word):
        if not done and i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            done = first_only
            out.append(word[i] + word[i + 1])
            i += 2
        else:
            out.append(word[i])
            i += 1
    return out


def _right_to_left(word: list[bytes], pair: tuple[bytes, bytes]) -> list[bytes]:
    out, i = [], len(word) - 1
    while i >= 0:
        if i >= 1 and word[i - 1] == pair[0] and word[i] == pair[1]:
            out.insert(0, word[i - 1] + word[i])
            i -= 2
        else:
            out.insert(0, word[i])
            i -= 1
    return out


def recount_train(text: str, vocab_size: int, specials=(), **switches) -> list[tuple[bytes, bytes]]:
    """`_recount_train`'s merges, computed once per text and switches (checks and mistakes share the texts)."""
    return list(_recount_train(text, vocab_size, tuple(specials), **switches))


@functools.lru_cache(maxsize=256)
def _recount_train(text: str, vocab_size: int, specials=(), *, tie: str = "max", overlaps: bool = True,
                  weighted: bool = True, whole_pieces: bool = False, split_specials: bool = True,
                  shortest_first: bool = False, pattern: str = GPT2_PATTERN, right_to_left: bool = False,
                  merges_limit: int | None = None, as_str: bool = False, distinct_pairs: bool = False,
                  min_count: int = 1, first_only: bool = False, delete_specials: bool = False):
    """The merges, recounting every pair of every pre-token occurrence after each merge. Switches (the known
    mistakes): `tie` "min" or "first" (first counted); `overlaps` False (a run `aaa` holds (a, a) once);
    `weighted` False (each distinct pre-token counted once); `whole_pieces` (no pre-tokenizer: pairs cross
    pre-tokens); `split_specials` False (special tokens trained on as text); `shortest_first`; another
    `pattern`; `right_to_left` merging; `merges_limit` (how many merges, instead of vocab_size - 256 -
    len(specials)); `as_str` (characters instead of bytes); `distinct_pairs` (a pair counted once per pre-token
    however often it occurs there); `min_count` (stop when the highest count is below it)."""
    words: list[list[bytes]] = []
    if delete_specials:  # the special tokens cut out of the text, the pieces around them joined
        text = "".join(piece for piece, special in split_at_specials(text, specials) if not special)
    for piece in pretokens(text, specials, pattern=pattern, shortest_first=shortest_first,
                           split_specials=split_specials, whole_pieces=whole_pieces):
        for token in piece:
            if as_str:
                words.append([c.encode("utf-8") for c in token])
            else:
                words.append([bytes([b]) for b in token.encode("utf-8")])
    if not weighted:
        unique = []
        for w in words:
            if w not in unique:
                unique.append(w)
        words = unique
    wanted = vocab_size - 256 - len(specials) if merges_limit is None else merges_limit
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < wanted:
        counts: dict[tuple[bytes, bytes], int] = {}
        for w in words:
            if distinct_pairs:
                for pair in set(zip(w, w[1:])):
                    counts[pair] = counts.get(pair, 0) + 1
                continue
            i = 0
            while i < len(w) - 1:
                pair = (w[i], w[i + 1])
                counts[pair] = counts.get(pair, 0) + 1
                if not overlaps and i + 2 < len(w) and w[i + 2] == w[i + 1] == w[i]:
                    i += 2
                else:
                    i += 1
        if not counts or max(counts.values()) < min_count:
            break
        top = max(counts.values())
        tied = [p for p in counts if counts[p] == top]
        pair = {"max": max, "min": min, "first": lambda ps: ps[0]}[tie](tied)
        merges.append(pair)
        words = [join_pair(w, pair, right_to_left=right_to_left, first_only=first_only) for w in words]
    return tuple(merges)


@functools.lru_cache(maxsize=16)
def ties_in(text: str, vocab_size: int, specials=()) -> list[int]:
    """The steps of recount_train at which the highest count is shared by several pairs."""
    steps = []
    words = [[bytes([b]) for b in t.encode("utf-8")] for piece in pretokens(text, specials) for t in piece]
    for step in range(vocab_size - 256 - len(specials)):
        counts: dict[tuple[bytes, bytes], int] = {}
        for w in words:
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        if not counts:
            break
        top = max(counts.values())
        if sum(1 for n in counts.values() if n == top) > 1:
            steps.append(step)
        pair = max(p for p in counts if counts[p] == top)
        words = [join_pair(w, pair) for w in words]
    return steps


def vocab_of(merges, specials=(), *, specials_last: bool = False, specials_from: int = 256) -> dict[int, bytes]:
    """The contract's vocabulary for these merges: bytes, specials, merges (or the specials after the merges, or
    from another id)."""
    vocab = {b: bytes([b]) for b in range(256)}
    tail = [a + b for a, b in merges]
    heads = [s.encode("utf-8") for s in specials]
    if specials_last:
        for i, value in enumerate(tail + heads):
            vocab[256 + i] = value
    else:
        for i, value in enumerate(heads):
            vocab[specials_from + i] = value
        for i, value in enumerate(tail):
            vocab[specials_from + len(heads) + i] = value
    return vocab


def gpt2_bpe(token: bytes, ranks: dict, *, by: str = "rank", right_to_left: bool = False,
             once: bool = False, first_only: bool = False) -> list[bytes]:
    """GPT-2's bpe(): while some adjacent pair has a rank, merge the lowest-ranked pair everywhere. Switches:
    `by` "last" (the highest rank first), "position" (the leftmost ranked pair first); `right_to_left`; `once`
    (each merge tried once, in the order the word's pairs appear, not again)."""
    word = [bytes([b]) for b in token]
    if once:
        for pair in sorted(ranks, key=ranks.get):
            word = join_pair(word, pair)
        return word
    while len(word) > 1:
        ranked = [(ranks[p], i, p) for i, p in enumerate(zip(word, word[1:])) if p in ranks]
        if not ranked:
            break
        if by == "rank":
            pair = min(ranked)[2]
        elif by == "last":
            pair = max(ranked)[2]
        else:
            pair = min(ranked, key=lambda r: r[1])[2]
        word = join_pair(word, pair, right_to_left=right_to_left, first_only=first_only)
    return word


def encode(text: str, vocab: dict[int, bytes], merges, specials=(), *, ids: str = "lowest", by: str = "rank",
           shortest_first: bool = False, split_specials: bool = True, whole_pieces: bool = False,
           pattern: str = GPT2_PATTERN, right_to_left: bool = False, bytes_only: bool = False,
           special_as_bytes: bool = False, special_ids_from_256: bool = False,
           ids_from_ranks: bool = False, first_only: bool = False, whole_lookup: bool = False) -> list[int]:
    """The contract's encode, with the switches of the known mistakes of bpe_encoding (`special_ids_from_256`:
    special token i is id 256 + i whatever the vocab says; `ids_from_ranks`: a merged piece's id is 256 +
    len(specials) + its merge's rank, not looked up in the vocab)."""
    ranks = {tuple(p): r for r, p in enumerate(merges)}
    table: dict[bytes, int] = {}
    for i in sorted(vocab, reverse=(ids == "highest")):
        table.setdefault(vocab[i], i)
    out: list[int] = []
    pieces = split_at_specials(text, specials, shortest_first) if split_specials else [(text, False)]
    for piece, special in pieces:
        if special and not special_as_bytes:
            out.append(256 + list(specials).index(piece) if special_ids_from_256 else table[piece.encode("utf-8")])
            continue
        tokens = [piece] if whole_pieces else [m.group() for m in regex.finditer(pattern, piece)]
        for token in tokens:
            data = token.encode("utf-8")
            if whole_lookup and data in table:  # the whole pre-token's id where the vocab holds it
                out.append(table[data])
                continue
            parts = [bytes([b]) for b in data] if bytes_only else gpt2_bpe(data, ranks, by=by,
                                                                           right_to_left=right_to_left,
                                                                           first_only=first_only)
            if ids_from_ranks:
                made = {a + b: 256 + len(specials) + r for r, (a, b) in enumerate(merges)}
                out += [p[0] if len(p) == 1 else made[p] for p in parts]
            else:
                out += [table[p] for p in parts]
    return out
