"""bpe_encoding: `BPETokenizer` in tokenizer.py (encode as GPT-2's bpe(), decode with errors="replace").

Vocabularies and merges are built here, by the checks' own trainer (`checklib/bpe.py`), never read from the
submission's train_bpe. Encodings are compared with the checks' own GPT-2-style encoder and, where no special
token or duplicate byte string is involved, with Hugging Face's `tokenizers` BPE model given the same merges.
"""
from __future__ import annotations

import pytest

from checklib import adapters, hf_bpe
from checklib.bpe import encode, recount_train, vocab_of
from checklib.compare import diagnosed, fail
from checklib.mistakes import bpe_encoding as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

EOT = "<|endoftext|>"
HINT = ("cut at the special tokens (longest first), pre-tokenize with PAT, then in each pre-token merge the pair of "
        "lowest rank (first in merges) everywhere, again and again; each piece's id is the lowest id of its bytes")
CORPUS = ("low lower lowest newer wider new " * 6 + "The quick brown fox jumps over the lazy dog's back; it's 2026!! "
          "中文字符 汉字 汉字 😀😀 😀 e\u0301e\u0301 naïve café aaa aaaa aaaaa abababab " * 3)
MERGES = recount_train(CORPUS, 256 + 120)
SPECIALS = (EOT, EOT + EOT)

ENCODED = {
    "english": "the lowest newer widest lower, it's 2026; we'll see!!\n\n  Don't.",
    "runs": "aaaaaaa aaa aaaa abababababa bab",
    "utf8": "中文汉字 😀😀😀 e\u0301 naïve cafés 👍🏽",
    "unseen": "zzz qqq ⚡⚡ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 \x00\x01 (bytes no merge holds, beside the lowest words)",
    "whitespace": "a   b\n\n\n c \t\t  \n end  ",
}
SPECIAL_ENCODED = {
    "inside_words": "low" + EOT + "er new" + EOT + "est",
    "doubled": "new" + EOT + EOT + "low " + EOT + EOT + EOT + "x",
    "partial": "<|endoftext|" + EOT + "<|end of text|>" + EOT,
}


def tokenizer(impl, vocab, merges, specials=()):
    return adapters.BPETokenizer(impl, vocab, merges, specials)


def check_encode(impl, text, vocab, merges, specials=(), hint: str = HINT):
    what = Phrase("BPETokenizer(...).encode({text})", text=repr(text))
    got = tokenizer(impl, vocab, merges, specials).encode(text)
    want = encode(text, vocab, merges, specials)
    if not (isinstance(got, list) and all(type(i) is int for i in got)):
        fail(what, Phrase("expected a list of int, got {got}", got=type(got).__name__),
             hint="return a plain list of Python ints")
    if got != want:
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        fail(what, Phrase("{got} ids, expected {n}; first difference at position {i}: {shown}, expected {want_i}",
                          got=len(got), n=len(want), i=first, shown=repr(got[first:first + 3]),
                          want_i=repr(want[first:first + 3])),
             hint=hint, actual=got, expected=want, mistakes=mistakes.encode_mistakes(text, vocab, merges, specials))
    return got


@pytest.mark.parametrize("name", list(ENCODED))
def test_encode_matches_gpt2_bpe(impl, name):
    check_encode(impl, ENCODED[name], vocab_of(MERGES), MERGES)


@pytest.mark.parametrize("name", ["english", "utf8", "runs"])
def test_encode_matches_huggingface(impl, name):
    vocab = vocab_of(MERGES)
    text = ENCODED[name]
    want = hf_bpe.encode(text, vocab, MERGES)
    what = Phrase("BPETokenizer(...).encode({text})", text=repr(text))
    got = tokenizer(impl, vocab, MERGES).encode(text)
    if got != want:
        fail(what, Phrase("{got}, expected Hugging Face's BPE encoding {want}", got=repr(got[:12]),
                          want=repr(want[:12])),
             hint=HINT, actual=got, expected=want, mistakes=mistakes.encode_mistakes(text, vocab, MERGES))


@pytest.mark.parametrize("specials_last", [False, True], ids=["specials_first", "specials_after_merges"])
@pytest.mark.parametrize("name", list(SPECIAL_ENCODED))
def test_special_tokens(impl, name, specials_last):
    """The vocab as train_bpe makes it, and with the special tokens after the merges (as GPT-2's <|endoftext|>)."""
    check_encode(impl, SPECIAL_ENCODED[name], vocab_of(MERGES, SPECIALS, specials_last=specials_last), MERGES,
                 SPECIALS, hint="cut the text at every special token, leftmost first and the longest where several start at "
                      "one position; each special token is one id, never pre-tokenized or merged")


# merges whose order matters: (b, c) before (a, b) in "abc"; (x, y) and (y, z) in "xyz"; (d, " ") never inside
# GPT-2's pre-tokens (a space starts the next one)
ORDERED = [(b"d", b" "), (b"b", b"c"), (b"a", b"b"), (b"c", b"d"), (b"ab", b"cd"), (b"a", b"bc"), (b"e", b"e"),
           (b"ee", b"e"), (b" ", b"a"), (b"x", b"y"), (b"y", b"z"), (b"xy", b"z")]


@pytest.mark.parametrize("text", ["abcd abc ab", "eee eeeee", "xyz xyzxyz", " abcd\tabcd  ab"],
                         ids=["abc", "runs", "xyz", "spaces"])
def test_merges_apply_in_training_order(impl, text):
    check_encode(impl, text, vocab_of(ORDERED), ORDERED,
                 hint="merge the adjacent pair that comes first in merges (the lowest rank), not the latest, not the "
                      "leftmost and not the most frequent; again and again, inside each pre-token")


def test_duplicate_bytes_take_the_lowest_id(impl):
    # merges (a, bc) and (ab, c) both give b"abc"; a special token equal to a merged string
    merges = [(b"b", b"c"), (b"a", b"b"), (b"a", b"bc"), (b"ab", b"c"), (b"l", b"o")]
    vocab = vocab_of(merges, ("lo",))
    for text in ("abc abcabc", "bcab abc", "lo low"):
        check_encode(impl, text, vocab, merges, ("lo",) if text == "lo low" else (),
                     hint="where two ids hold the same bytes, the byte string becomes the lowest of them")


@pytest.mark.parametrize("name", [*ENCODED, *SPECIAL_ENCODED])
def test_round_trip(impl, name):
    vocab = vocab_of(MERGES, SPECIALS)
    text = {**ENCODED, **SPECIAL_ENCODED}[name]
    tok = tokenizer(impl, vocab, MERGES, SPECIALS)
    ids = tok.encode(text)
    got = tok.decode(ids)
    if got != text:
        models = {mistakes.DECODE_BYTES: text.encode("utf-8")}
        if isinstance(ids, list) and all(i in vocab for i in ids):
            models[mistakes.DECODE_PER_TOKEN] = "".join(vocab[i].decode("utf-8", errors="replace") for i in ids)
        fail(Phrase("decode(encode({text}))", text=repr(text)), Phrase("got {got}", got=repr(got)),
             hint="join the ids' byte strings, then decode the whole as UTF-8 (not each token on its own)",
             actual=got, expected=text, mistakes=models)


def test_decode_invalid_utf8_replaces(impl):
    vocab = vocab_of(MERGES)
    tok = tokenizer(impl, vocab, MERGES)
    ids = [0xe4, 0xb8, 65, 0xff, 66]  # half of 中, A, a byte no UTF-8 holds, B
    want = bytes(ids).decode("utf-8", errors="replace")
    what = Phrase("decode({ids})", ids=repr(ids))
    try:
        got = tok.decode(ids)
    except StudentError as exc:
        if type(exc) is StudentError and "UnicodeDecodeError" in exc.kinds:
            raise diagnosed(Phrase("{what}: {problem}", what=what, problem=exc.describe()),
                            mistakes.STRICT_DECODE) from None
        raise
    if got != want:
        fail(what, Phrase("got {got}, expected {want}", got=repr(got), want=repr(want)),
             hint="decode with errors=\"replace\": each invalid byte sequence becomes U+FFFD",
             actual=got, expected=want,
             mistakes={mistakes.DECODE_IGNORE: bytes(ids).decode("utf-8", errors="ignore"),
                       mistakes.DECODE_BYTES: bytes(ids),
                       mistakes.DECODE_PER_TOKEN: "".join(bytes([i]).decode("utf-8", errors="replace") for i in ids)})


def test_rejects_unknown_id(impl):
    tok = tokenizer(impl, vocab_of(MERGES), MERGES)
    message = expect_value_error(tok.decode, [65, 256 + 120 + 7], what="decode([65, 376]) (376 is not in vocab)")
    assert message, "the ValueError should name the id that is not in the vocabulary"


def test_rejects_special_token_not_in_vocab(impl):
    message = expect_value_error(adapters.BPETokenizer, impl, vocab_of(MERGES), MERGES, (EOT,),
                                 what="BPETokenizer(vocab, merges, special_tokens=('<|endoftext|>',)) with no "
                                      "<|endoftext|> in vocab")
    assert message, "the ValueError should name the special token that the vocabulary lacks"


def test_from_scratch(target_folder):
    """No tokenizers, tiktoken or sentencepiece (course.yml lists them)."""
    assert_from_scratch(target_folder, "bpe_encoding")
