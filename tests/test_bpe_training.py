"""bpe_training: `train_bpe` in tokenizer.py (byte-level BPE as CS336's first assignment trains it).

The merges are compared with the checks' own trainer (`checklib/bpe.py`), written plainly: every pair of every
pre-token occurrence recounted after each merge, ties to `max` of the tied pairs. Where the contract's rules
coincide with Hugging Face's `tokenizers` (its BpeTrainer on GPT-2's byte-level pre-tokenizer, up to the first
step whose highest count is tied), the merges are compared with it too. The texts are where the common mistakes
show: tied counts, runs like `aaa`, multi-byte UTF-8, special tokens inside words and overlapping ones.
"""
from __future__ import annotations

import random

import pytest

from checklib import adapters, hf_bpe
from checklib.bpe import recount_train, ties_in, vocab_of
from checklib.compare import fail
from checklib.mistakes import bpe_training as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error
from grader.text import Phrase

EOT = "<|endoftext|>"
HINT = ("count every adjacent pair inside each pre-token (overlaps too), times the pre-token's count; merge the "
        "highest count, ties to max() of the tied (bytes, bytes) pairs; replace it left to right without overlap")


def zipf_text(seed: int, words: int = 500) -> str:
    r = random.Random(seed)
    letters = "etaoinshrdlu"
    weights = [2 ** (-i / 2) for i in range(len(letters))]
    return " ".join("".join(r.choices(letters, weights, k=r.randint(2, 7))) for _ in range(words))


ENGLISH = ("low lower lowest newer wider new " * 6 + "The quick brown fox jumps over the lazy dog's back; "
           "it's 2026, we'll see 12345 dogs!!  \n\n  Don't stop: they're here, I've seen 'em.\t\tEnd. ")
TEXTS = {
    "english": (ENGLISH * 2, 256 + 60, ()),
    "ties": ("ab ab cd cd ef ef ba ba dc dc " * 4, 256 + 20, ()),
    "runs": ("aaa aaaa aaaaa aaaaaa bbbbbbb a aa " * 5 + "abababab baba " * 3, 256 + 25, ()),
    "utf8": ("中文字符 汉字 汉字 中文 😀😀 😀👍🏽 e\u0301e\u0301 naïve café Ωμέγα " * 4, 256 + 60, ()),
    "whitespace": ("a  b   c\n\n\n d \t\te  \n" * 8 + "x" * 9, 256 + 30, ()),
    "zipf": (zipf_text(1), 256 + 80, ()),
}
SPECIAL_TEXTS = {
    "inside_words": (ENGLISH.replace("low", "lo" + EOT + "w", 3) + EOT + ENGLISH + "hel" + EOT + "lo", 256 + 1 + 40,
                     (EOT,)),
    "overlapping": ((ENGLISH + EOT + EOT + "wider" + EOT + "er " + EOT + "<|end") * 2, 256 + 2 + 40,
                    (EOT, EOT + EOT)),
    "overlapping_prefix": (("<s>ab ab<s>abab <s>abc xab " + ENGLISH) * 2, 256 + 2 + 40, ("<s>", "<s>ab")),
}


def trained(impl, text: str, vocab_size: int, specials=()):
    """(vocab, merges) as train_bpe returns them, held to the contract's types."""
    what = Phrase("train_bpe(<{n} characters>, vocab_size={vocab_size}, special_tokens={specials})", n=len(text),
                  vocab_size=vocab_size, specials=repr(tuple(specials)))
    result = adapters.train_bpe_vocab(impl)(text, vocab_size, tuple(specials))
    if not (isinstance(result, tuple) and len(result) == 2):
        fail(what, Phrase("expected a tuple (vocab, merges), got {got}", got=type(result).__name__),
             hint="return vocab, merges")
    vocab, merges = result
    if not isinstance(vocab, dict) or not all(type(k) is int and type(v) is bytes for k, v in vocab.items()):
        fail(what, "the vocab is not a dict[int, bytes]", hint="vocab maps each id (an int) to its bytes")
    if not isinstance(merges, list) or not all(isinstance(m, tuple) and len(m) == 2 and
                                               all(type(x) is bytes for x in m) for m in merges):
        fail(what, "the merges are not a list of (bytes, bytes) tuples",
             hint="each merge is a tuple of two byte strings, in the order learned")
    return what, vocab, merges


def check_merges(what, got, want, models, hint: str = HINT) -> None:
    if got == want:
        return
    first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    if first < min(len(got), len(want)):
        problem = Phrase("merge {i} is {got}, expected {want} ({n} merges expected)", i=first, got=repr(got[first]),
                         want=repr(want[first]), n=len(want))
    else:
        problem = Phrase("{got} merges learned, expected {n} (the first {same} are right)", got=len(got),
                         n=len(want), same=first)
    fail(Phrase("the merges of {what}", what=what), problem, hint=hint, actual=got, expected=want, mistakes=models)


@pytest.mark.parametrize("name", list(TEXTS))
def test_merges_match_a_recount(impl, name):
    text, vocab_size, specials = TEXTS[name]
    what, _, merges = trained(impl, text, vocab_size, specials)
    check_merges(what, merges, recount_train(text, vocab_size, specials),
                 mistakes.merge_mistakes(text, vocab_size, specials))


@pytest.mark.parametrize("name", list(SPECIAL_TEXTS))
def test_special_tokens_split_the_text(impl, name):
    text, vocab_size, specials = SPECIAL_TEXTS[name]
    what, _, merges = trained(impl, text, vocab_size, specials)
    check_merges(what, merges, recount_train(text, vocab_size, specials),
                 mistakes.merge_mistakes(text, vocab_size, specials),
                 hint="cut the text at the special tokens first (the longest where several start at one place); "
                      "pairs never enter or span a special token")


@pytest.mark.parametrize("name", ["english", "utf8", "inside_words", "overlapping"])
def test_vocab_layout(impl, name):
    text, vocab_size, specials = {**TEXTS, **SPECIAL_TEXTS}[name]
    what, vocab, merges = trained(impl, text, vocab_size, specials)
    want_merges = recount_train(text, vocab_size, specials)
    want = vocab_of(want_merges, specials)
    if vocab != want:
        wrong = sorted(set(vocab) ^ set(want)) or [i for i in sorted(want) if vocab.get(i) != want[i]]
        i = wrong[0]
        fail(Phrase("the vocab of {what}", what=what),
             Phrase("id {i} holds {got}, expected {want} ({n} entries expected, {m} returned)", i=i,
                    got=repr(vocab.get(i)), want=repr(want.get(i)), n=len(want), m=len(vocab)),
             hint="ids 0..255: the single bytes; then the special tokens' UTF-8 bytes; then each merge's two byte "
                  "strings joined, in the order learned",
             actual=vocab, expected=want, mistakes=mistakes.vocab_mistakes(want_merges, specials))


@pytest.mark.parametrize("text, vocab_size", [("ab ab ab cd", 256 + 50), ("a b c d e", 256 + 5), ("", 300),
                                              ("abc abc", 256)],
                         ids=["few_pairs", "single_bytes", "empty", "no_room_for_merges"])
def test_stops_when_no_pairs_are_left(impl, text, vocab_size):
    what, vocab, merges = trained(impl, text, vocab_size)
    want = recount_train(text, vocab_size)
    check_merges(what, merges, want, mistakes.merge_mistakes(text, vocab_size),
                 hint="stop as soon as no pre-token holds two tokens: the vocabulary may stay below vocab_size")
    if len(vocab) != 256 + len(want):
        fail(Phrase("the vocab of {what}", what=what), Phrase("{m} entries, expected {n}", m=len(vocab),
                                                              n=256 + len(want)),
             hint="one entry per byte, per special token and per merge learned")


@pytest.mark.parametrize("seed", [1, 3, 5])
def test_matches_huggingface_before_the_first_tie(impl, seed):
    text, vocab_size = zipf_text(seed), 256 + 40
    what, _, merges = trained(impl, text, vocab_size)
    ties = ties_in(text, vocab_size)
    upto = ties[0] if ties else vocab_size - 256
    want = list(hf_bpe.train(text, vocab_size - 256)[:upto])
    check_merges(what, merges[:upto], want, {},
                 hint="Hugging Face's byte-level BPE trainer learns these first merges (before any tie): count "
                      "pairs inside GPT-2's pre-tokens and merge the most frequent")


@pytest.mark.parametrize("vocab_size, specials", [(255, ()), (256, (EOT,)), (257, (EOT, "<pad>"))],
                         ids=["below_bytes", "no_room_for_special", "no_room_for_two"])
def test_rejects_vocab_size_below_bytes_and_specials(impl, vocab_size, specials):
    message = expect_value_error(adapters.train_bpe(impl), "some text", vocab_size, specials,
                                 what=Phrase("train_bpe('some text', {vocab_size}, {specials})", vocab_size=vocab_size,
                                             specials=repr(specials)))
    assert message, "the ValueError should say that vocab_size is below 256 + len(special_tokens)"


def test_from_scratch(target_folder):
    """No tokenizers, tiktoken or sentencepiece (course.yml lists them)."""
    assert_from_scratch(target_folder, "bpe_training")
