"""The known mistakes of `bpe_training` (train_bpe): its entries and bundles (see `checklib/mistakes/__init__.py`).
Every model is the checks' own recounting trainer (`checklib/bpe.py`) with one switch on."""
from __future__ import annotations

from ..bpe import recount_train, vocab_of
from ..catalogue import Mistakes, simulated, variants

SIMPLE_PATTERN = r"\S+|\s+"

MERGE_MISTAKES = variants("bpe_training", [
    ("your tie-break takes the smallest of the tied pairs: where counts tie, the contract merges the greater pair "
     "as Python orders (bytes, bytes) tuples, max() of the tied pairs", "min_tie_break"),
    ("where counts tie, you merge the pair counted first (max of the counts alone, or most_common(1)): the "
     "contract merges the greater pair, max() of the tied (bytes, bytes) pairs", "first_seen_tie_break"),
    ("you count a run like b'aaa' as holding (a, a) once: every adjacent position counts, overlaps too, so "
     "b'aaa' holds (a, a) twice", "overlaps_not_counted"),
    ("you count a pair once per pre-token however often it occurs there (a set of its pairs): every adjacent "
     "position counts, so b'abab' holds (a, b) twice", "pairs_counted_once_per_pretoken"),
    ("you stop when the most frequent pair occurs only once: training goes on while any pre-token has two tokens "
     "left, whatever the count", "stops_at_count_one"),
    ("your pre-tokens drop the whitespace (text.split(), or \\S+): GPT-2's pattern keeps it, a space joined to "
     "the word after it (' hello') and runs of whitespace as tokens of their own", "whitespace_dropped"),
    ("you count each distinct pre-token once: a pair's count sums over every occurrence of every pre-token "
     "(weigh each pre-token by how often it occurs)", "pretokens_not_weighted"),
    ("your pairs cross pre-tokens: pre-tokenize each piece with GPT-2's pattern and count pairs only inside "
     "each pre-token", "pairs_cross_pretokens"),
    ("your special tokens are trained on as text: cut the text at them first; no pair spans or enters a "
     "special token", "specials_trained_on"),
    ("where two special tokens start at one position you cut at the shorter: the longest one that starts there "
     "is the token", "shortest_special_first"),
    ("your pre-tokenizer is not GPT-2's pattern (whitespace split, or \\S+|\\s+): use the contract's PAT with "
     "regex.finditer", "simplified_pattern"),
    ("your merge joins the pair from the right end of a pre-token: replace it left to right without overlap "
     "(a a a becomes aa a)", "merged_right_to_left"),
    ("your merge replaces only the first occurrence of the pair in each pre-token: replace every occurrence, left "
     "to right without overlap", "merged_first_only"),
    ("you delete the special tokens from the text, so the pieces around one join and pairs span it: cut the text at "
     "them and pre-tokenize each piece on its own", "specials_deleted"),
    ("you learn vocab_size - 256 merges, forgetting that the special tokens take ids too: stop when the "
     "vocabulary holds vocab_size entries", "specials_not_counted"),
    ("you learn one merge too few: stop only when the vocabulary holds vocab_size entries", "one_merge_short"),
    ("you learn one merge too many: stop when the vocabulary holds vocab_size entries", "one_merge_over"),
    ("you split the pre-tokens into characters, not bytes: byte-level BPE starts from each pre-token's UTF-8 "
     "bytes (.encode('utf-8'))", "characters_not_bytes"),
])

SWITCHES = {"min_tie_break": dict(tie="min"), "first_seen_tie_break": dict(tie="first"),
            "overlaps_not_counted": dict(overlaps=False), "pretokens_not_weighted": dict(weighted=False),
            "pairs_cross_pretokens": dict(whole_pieces=True), "specials_trained_on": dict(split_specials=False),
            "shortest_special_first": dict(shortest_first=True), "simplified_pattern": dict(pattern=SIMPLE_PATTERN),
            "merged_right_to_left": dict(right_to_left=True), "characters_not_bytes": dict(as_str=True),
            "pairs_counted_once_per_pretoken": dict(distinct_pairs=True), "stops_at_count_one": dict(min_count=2),
            "whitespace_dropped": dict(pattern=r"\S+"), "merged_first_only": dict(first_only=True),
            "specials_deleted": dict(delete_specials=True)}


def _merges(text: str, vocab_size: int, specials, variant: str):
    extra = {"specials_not_counted": len(specials), "one_merge_short": -1, "one_merge_over": 1}.get(variant)
    if extra is not None:
        if variant == "specials_not_counted" and not specials:
            return None
        return recount_train(text, vocab_size, specials, merges_limit=max(0, vocab_size - 256 - len(specials) + extra))
    return recount_train(text, vocab_size, specials, **SWITCHES[variant])


def merge_mistakes(text: str, vocab_size: int, specials=()) -> Mistakes:
    """For the merges train_bpe(text, vocab_size, specials) learns."""
    return simulated(MERGE_MISTAKES, lambda variant: _merges(text, vocab_size, tuple(specials), variant))


VOCAB_MISTAKES = variants("bpe_training", [
    ("your vocabulary puts the special tokens after the merges: they take ids 256, 257, ... and the merges "
     "follow them", "specials_after_merges"),
    ("your special tokens' ids start at 0 or overwrite bytes: ids 0..255 are the 256 single bytes, the special "
     "tokens come next from 256", "specials_from_zero"),
])


def vocab_mistakes(merges, specials=()) -> Mistakes:
    """For the vocabulary that goes with `merges` (the right ones)."""
    def simulate(variant: str):
        if variant == "specials_after_merges":
            return vocab_of(merges, specials, specials_last=True) if specials else None
        return vocab_of(merges, specials, specials_from=0) if specials else None
    return simulated(VOCAB_MISTAKES, simulate)
