"""Hugging Face's `tokenizers` (byte-level BPE, offline) as the BPE checks' second reference, where its rules
coincide with the contract's: its trainer up to the first step whose highest count is tied (its tie-break is its
own), and its BPE model's encoding with given merges (GPT-2's bpe()) where no two ids hold the same bytes."""
from __future__ import annotations

import functools
import json


def _unicode_bytes() -> dict[str, bytes]:
    """GPT-2's bytes_to_unicode, reversed: the character that stands for each byte -> the byte."""
    shown = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = shown[:], 0
    for b in range(256):
        if b not in shown:
            shown.append(b)
            chars.append(256 + extra)
            extra += 1
    return {chr(c): bytes([b]) for b, c in zip(shown, chars)}


BYTE_OF = _unicode_bytes()
CHAR_OF = {b: c for c, b in BYTE_OF.items()}


def _text(data: bytes) -> str:
    return "".join(CHAR_OF[data[i:i + 1]] for i in range(len(data)))


@functools.lru_cache(maxsize=16)
def train(text: str, merges: int) -> tuple[tuple[bytes, bytes], ...]:
    """The merges Hugging Face's BpeTrainer learns from `text` on GPT-2's byte-level pre-tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=256 + merges, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False, min_frequency=0)
    tokenizer.train_from_iterator([text], trainer=trainer)
    out = []
    for merge in json.loads(tokenizer.to_str())["model"]["merges"]:
        a, b = merge if isinstance(merge, list) else merge.split(" ")
        out.append((b"".join(BYTE_OF[c] for c in a), b"".join(BYTE_OF[c] for c in b)))
    return tuple(out)


def encode(text: str, vocab: dict[int, bytes], merges) -> list[int]:
    """Hugging Face's BPE model on GPT-2's pre-tokenizer, with this vocabulary (no special tokens, no two ids of
    the same bytes) and these merges."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    model = models.BPE({_text(v): i for i, v in vocab.items()}, [(_text(a), _text(b)) for a, b in merges])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    return tokenizer.encode(text).ids
