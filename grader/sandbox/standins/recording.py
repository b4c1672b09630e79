"""Grader tools that record what student code does with what a check hands it.

`RecordingKVCache` keeps every `update` call's arguments, so a check can see what
was appended; it passes each call on to the cache it wraps (the grader's where a
stand-in is loaded, else the student's own), so it is no answer itself.
`RecordingLM` does the same for a language model's forward calls (sampling's
`generate`), and `Randomness` hands out seeded `torch.Generator`s and reads the
global random state on the implementation's side, where the draws happen.
`SameObjects` calls one function of the implementation again and again with some of its
arguments the very same objects every time (a model's rope tables, say), so that what the
function keeps between calls, keyed by those objects, is used again as it would be in a model.
"""
from __future__ import annotations

import torch
import torch.nn as nn
from torch import Tensor

impl = None  # the implementation package's modules, set for each package (see __init__.py)


class RecordingKVCache:
    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[tuple[Tensor, Tensor]] = []

    def update(self, k: Tensor, v: Tensor):
        self.calls.append((k.detach().clone(), v.detach().clone()))
        return self.inner.update(k, v)

    def updates(self) -> list[tuple[Tensor, Tensor]]:
        return list(self.calls)

    def __len__(self) -> int:
        return len(self.inner)


class RecordingLM(nn.Module):
    """Wraps a language model (`forward(idx, caches=None)`, `new_caches()`, `max_len`); records every forward call."""

    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner = inner
        self.max_len, self.vocab_size = inner.max_len, inner.vocab_size
        self.made: list[list] = []  # every cache list new_caches handed out, in order
        self.log: list[dict] = []

    def new_caches(self) -> list:
        caches = self.inner.new_caches()
        self.made.append(caches)
        return caches

    def forward(self, idx: Tensor, caches=None) -> Tensor:
        # which cache list (the n-th new_caches made, -1 for another) and how many positions it held before
        which = None if caches is None else next((i for i, c in enumerate(self.made) if c is caches), -1)
        held = None if caches is None else len(caches[0])
        self.log.append({"tokens": idx.detach().clone(), "caches": which, "held": held})
        return self.inner(idx, caches=caches)

    def calls(self) -> list[dict]:
        return list(self.log)


class Randomness:
    """Seeded generators, and the global random state, of the process that runs student code."""

    def generator(self, seed: int) -> torch.Generator:
        return torch.Generator().manual_seed(seed)

    def global_state(self) -> Tensor:
        return torch.get_rng_state()


class SameObjects:
    """`name` ("rope.apply_rope") of the implementation, or an object of its side (a module), called with `held`
    inserted at `slots` (argument indices) and `keywords` (a model's rope tables, say) passed every time."""

    def __init__(self, name, slots: list[int], *held, **keywords) -> None:
        if isinstance(name, str):
            module, _, function = name.partition(".")
            self.function = getattr(getattr(impl, module), function)
        else:
            self.function = name
        self.slots, self.held, self.keywords = list(slots), held, keywords

    def __call__(self, *args, **kwargs):
        args = list(args)
        for slot, value in zip(self.slots, self.held):
            args.insert(slot, value)
        return self.function(*args, **kwargs, **self.keywords)


class WithVocab:
    """The implementation's tokenizer.py with its vocabularies as plain pairs: the wire sends a dict's keys as
    strings, so a `dict[int, bytes]` crosses it as a list of (id, bytes) pairs, made a dict again on this side
    (`BPETokenizer`'s argument) or taken apart here (`train_bpe`'s result: a dict's items, in its order; anything
    else as it came)."""

    def train_bpe(self, *args, **kwargs):
        result = impl.tokenizer.train_bpe(*args, **kwargs)
        if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], dict):
            return ("pairs", list(result[0].items())), result[1]
        return result

    def tokenizer(self, pairs, merges, special_tokens=()):
        return _Tokenizer(impl.tokenizer.BPETokenizer(dict(pairs), merges, special_tokens))


class _Tokenizer:
    """A BPETokenizer of the implementation's, its methods passed on."""

    def __init__(self, inner) -> None:
        self.inner = inner

    def encode(self, text):
        return self.inner.encode(text)

    def decode(self, ids):
        return self.inner.decode(ids)
