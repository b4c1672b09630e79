"""Trusted stand-ins for the contract, one small module ("piece") per part of it.

While one component's checks run, every other component's code is replaced by
these, so a bug costs points only in the component where it lives. They are
grader code, built on PyTorch's own operations; they never come from
`solutions/`.

A worker that grades component C loads only pieces of names C does not own
(`available_for`), and of those only the ones its checks can reach
(grader/engine/reach.py): the process that runs C's code never holds a working
implementation of C, nor the parts of unrelated ones. Pieces do not import each other. Each is executed afresh
for every implementation package with a global `impl` whose attributes are that
package's modules (`impl.attention.causal_mask`): a piece calls the rest of the
contract through the implementation, as patched for C, so a stand-in of one
component never carries another component's answer.

A student release ships only this file and the tools (`recording.py`, `parameters.py`): with a piece
missing, the student's own code stands in for it (the component is graded in
context).
"""
from __future__ import annotations

from importlib.machinery import SourceFileLoader
from pathlib import Path
from typing import Iterable

from ...contract import FACTS, OWNERS

FOLDER = Path(__file__).resolve().parent

# contract name (as in contract.OWNERS) -> the piece that implements it (each component's row of contract.FACTS)
PIECES: dict[str, str] = {name.partition(".")[2]: piece for row in FACTS for piece, names in row.pieces.items()
                          for name in names}
# Grader tools the checks create on the implementation's side: name -> (piece, the contract name it wraps,
# or None). A tool holds no answer: it passes each call on to the stand-in of that name (else the student's
# own), or, wrapping nothing, only holds plain data (`Parameters`: tensors for an optimizer to update) or passes
# calls on to what the check hands it (`RecordingLM`: a model; `Randomness`: torch's generators; `SameObjects`: the
# implementation's own function, with the same objects held for some arguments every time; `WithVocab`: tokenizer.py's
# own functions, with a vocabulary sent as (id, bytes) pairs).
TOOLS: dict[str, tuple[str, str | None]] = {"RecordingKVCache": ("recording", "KVCache"),
                                            "Parameters": ("parameters", None),
                                            "RecordingLM": ("recording", None),
                                            "Randomness": ("recording", None),
                                            "SameObjects": ("recording", None),
                                            "WithVocab": ("recording", None)}


def owners(name: str) -> frozenset[str]:
    """The components whose checks grade the contract name `name`."""
    for names in OWNERS.values():
        if name in names:
            return names[name]
    raise KeyError(name)


def module_of(name: str) -> str:
    """The contract file (module) that defines `name`."""
    return next(module for module, names in OWNERS.items() if name in names)


def shipped(piece: str) -> bool:
    return (FOLDER / f"{piece}.py").is_file()


def available_for(component: str | None, also: tuple[str, ...] = (), mates: frozenset[str] = frozenset(),
                  names: Iterable[str] | None = None) -> frozenset[str]:
    """The pieces a worker grading `component` may load: those of names it does not own (of `names` only, where
    given: the names its checks can reach, grader/engine/reach.py), and of `also`; in a worker it shares with
    `mates` (grader/engine/planning.py's SHARED_WORKERS), none of names they own either.

    `component=None` (grading everything in context) loads none.
    """
    if component is None:
        return frozenset()
    wanted = PIECES if names is None else {name: PIECES[name] for name in names if name in PIECES}
    pieces = {piece for name, piece in wanted.items() if not owners(name) & {component, *mates}}
    pieces |= {PIECES[name] for name in also if name in PIECES}
    pieces |= {piece for piece, _ in TOOLS.values()}
    return frozenset(p for p in pieces if shipped(p))


def read(pieces: frozenset[str]) -> dict[str, object]:
    """piece -> its compiled code; read before the worker is confined (the files are hidden after).

    Through Python's own bytecode cache (`__pycache__`, as an import would): a worker then loads its
    pieces in a fraction of a millisecond instead of compiling them (each worker reads its own, so none
    holds a piece it may not use).
    """
    return {piece: SourceFileLoader(f"_standin_{piece}", str(FOLDER / f"{piece}.py")).get_code(None)
            for piece in sorted(pieces)}
