"""The known mistakes of `bpe_encoding` (BPETokenizer): its entries and bundles (see `checklib/mistakes/__init__.py`).
Every model is the checks' own GPT-2-style encoder (`checklib/bpe.py`) with one switch on."""
from __future__ import annotations

from ..bpe import encode
from ..catalogue import Mistakes, recognised, simulated, variants

ENCODE_MISTAKES = variants("bpe_encoding", [
    ("you merge the pair of the highest rank first (the latest merge): GPT-2's bpe() merges the pair that comes "
     "first in merges, the lowest rank", "latest_merge_first"),
    ("you merge the leftmost pair that has a rank: merge the pair of lowest rank wherever it occurs, whatever "
     "its position", "leftmost_pair_first"),
    ("your merge joins the pair from the right end of the pre-token: merge left to right without overlap",
     "merged_right_to_left"),
    ("your encode drops the whitespace (text.split(), or \\S+): pre-tokenize with GPT-2's pattern, which keeps "
     "every character", "whitespace_dropped"),
    ("you look the whole pre-token up in the vocab before merging: a pre-token's tokens are what its merges give, "
     "even where the vocab holds its whole bytes under another id", "whole_pretoken_lookup"),
    ("where two ids hold the same bytes you take the highest: each byte string becomes the lowest such id",
     "highest_duplicate_id"),
    ("where two special tokens start at one position you cut at the shorter: the longest one that starts there "
     "is the token (a doubled <|endoftext|> is one token)", "shorter_special_first"),
    ("your special tokens are encoded as text (pre-tokenized and merged): cut the text at them first, each is "
     "one id", "specials_encoded_as_text"),
    ("your merges cross pre-tokens: pre-tokenize each piece with GPT-2's pattern and merge inside each "
     "pre-token", "merges_cross_pretokens"),
    ("your encode pre-tokenizes with another pattern than GPT-2's (whitespace split, or \\S+|\\s+): the "
     "pre-tokens must be those train_bpe counted in, the contract's PAT with regex.finditer", "simplified_pattern"),
    ("your special tokens' ids are 256, 257, ... in the order given: look each one's id up in the vocab (GPT-2's "
     "<|endoftext|> is 50256, after the merges)", "special_ids_from_256"),
    ("you compute a merged piece's id from its merge's rank (256 + number of specials + rank): look its bytes up "
     "in the vocab, which may number them otherwise", "ids_from_ranks"),
    ("your encode never merges: each pre-token's bytes must be merged with the merges, lowest rank first",
     "no_merges"),
])

SWITCHES = {"latest_merge_first": dict(by="last"), "leftmost_pair_first": dict(by="position"),
            "merged_right_to_left": dict(right_to_left=True), "highest_duplicate_id": dict(ids="highest"),
            "shorter_special_first": dict(shortest_first=True), "specials_encoded_as_text": dict(special_as_bytes=True),
            "merges_cross_pretokens": dict(whole_pieces=True), "simplified_pattern": dict(pattern=r"\S+|\s+"),
            "no_merges": dict(bytes_only=True), "special_ids_from_256": dict(special_ids_from_256=True),
            "ids_from_ranks": dict(ids_from_ranks=True), "whitespace_dropped": dict(pattern=r"\S+"), "whole_pretoken_lookup": dict(whole_lookup=True)}


def encode_mistakes(text: str, vocab, merges, specials=()) -> Mistakes:
    """For encode(text) by BPETokenizer(vocab, merges, specials)."""
    def simulate(variant: str):
        try:
            return encode(text, vocab, merges, specials, **SWITCHES[variant])
        except (KeyError, ValueError):  # a byte string the vocabulary lacks: this mistake would have raised
            return None
    return simulated(ENCODE_MISTAKES, simulate)


STRICT_DECODE = recognised(
    "bpe_encoding", "strict_decode",
    "your decode raises on bytes that are not valid UTF-8 (a token may hold half a character): decode with "
    "errors=\"replace\"")
DECODE_PER_TOKEN = recognised(
    "bpe_encoding", "decode_per_token",
    "you decode each token's bytes on its own: a token may hold part of a character, so join all the bytes first, "
    "then decode once")
DECODE_BYTES = recognised(
    "bpe_encoding", "decode_returns_bytes",
    "your decode returns the joined bytes: decode them to a str, .decode(\"utf-8\", errors=\"replace\")")
DECODE_IGNORE = recognised(
    "bpe_encoding", "decode_drops_invalid",
    "your decode drops bytes that are not valid UTF-8 (errors=\"ignore\"): decode with errors=\"replace\", which "
    "puts U+FFFD in their place")
