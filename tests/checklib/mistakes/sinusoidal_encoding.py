"""The known mistakes of `sinusoidal_encoding` (Sinusoidal positional encoding): its entries, simulators and
bundles (see `checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, simulated
from ..tolerance import Approximate
from .general import plus


# Families of both encodings: the exponent 2i / d off by a little in its numerator and/or denominator.
EXPONENT_OFFSETS = [(a, b) for a in (-2, -1, 0, 1, 2) for b in (-2, -1, 0, 1, 2) if (a, b) != (0, 0)]


@functools.cache
def exponent_texts(entry: Mistake, d: str, skip: tuple[int, int]) -> dict[str, tuple[int, int]]:
    """{sentence: (a, b)} of the EXPONENT_OFFSETS but `skip` (a named entry's), formatted once."""
    def term(name: str, offset: int) -> str:
        return f"({plus(name, offset)})" if offset else name
    return {entry.text(numerator=term("2i", a), denominator=term(d, b)): (a, b)
            for a, b in EXPONENT_OFFSETS if (a, b) != skip}


def table(max_len: int, d_model: int, *, base: float = 10000.0, exponent: str = "2i", first: int = 0,
          even=torch.sin, odd=torch.cos, angle: str = "p*w", denominator: int = 0, numerator: int = 0,
          layout: str = "interleaved", rounded: bool = False) -> Tensor | Approximate:
    """(max_len, d_model) in float64, with one mistake switched on (the exponent is (2i + numerator) /
    (d_model + denominator); `layout` "halves": the even columns' values first, then the odd ones'). `rounded`:
    known only to float32's rounding of each angle (frequencies above 1 make angles far beyond the position)."""
    pairs = torch.arange(0, d_model, 2, dtype=torch.float64)
    if exponent == "i":
        pairs = pairs / 2
    position = torch.arange(first, first + max_len, dtype=torch.float64).unsqueeze(1)
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    error = torch.zeros(max_len, d_model, dtype=torch.float64)
    for parity, fn in ((0, even), (1, odd)):
        exps = pairs + (parity if exponent == "column" else 0) + numerator
        w = torch.pow(base, -exps / (d_model + denominator))
        a = {"p*w": position * w, "p+w": position + w, "w": w.expand(max_len, -1)}[angle]
        pe[:, parity::2] = fn(a)
        error[:, parity::2] = 4 * torch.finfo(torch.float32).eps * a.abs()
    if layout == "halves":
        pe, error = (torch.cat([t[:, 0::2], t[:, 1::2]], dim=-1) for t in (pe, error))
    return Approximate(pe, error) if rounded else pe


TABLE_MISTAKES = (
    mistake("sinusoidal_encoding", "sin_cos_swapped",
            "your even columns hold cosines: they hold the sines (are sin and cos swapped?)", dict(even=torch.cos)),
    mistake("sinusoidal_encoding", "odd_sines",
            "your odd columns hold sines: they hold the cosines of the same angles as the sines before them",
            dict(odd=torch.sin)),
    mistake("sinusoidal_encoding", "exponent_i",
            "your exponent uses the pair index i instead of 2i: the frequencies are 10000^(-2i/d_model)",
            dict(exponent="i")),
    mistake("sinusoidal_encoding", "exponent_column",
            "your exponent uses the column index, so a cosine gets a different frequency from the sine before it: "
            "both columns 2i and 2i+1 use 10000^(-2i/d_model)", dict(exponent="column")),
    mistake("sinusoidal_encoding", "base_1000", "your wavelengths use the base 1000 instead of 10000", dict(base=1000.0)),
    mistake("sinusoidal_encoding", "exponent_over_d_minus_1",
            "your exponent divides by d_model - 1: the frequencies are 10000^(-2i/d_model)", dict(denominator=-1)),
    mistake("sinusoidal_encoding", "positive_exponent",
            "your frequencies grow with the pair index, 10000^(+2i/d_model) (the minus sign of the exponent is "
            "missing): they shrink, 10000^(-2i/d_model), the wavelengths growing from 2π to 10000·2π",
            dict(base=1e-4, rounded=True)),
    mistake("sinusoidal_encoding", "positions_from_1", "your positions start at 1 instead of 0", dict(first=1)),
    mistake("sinusoidal_encoding", "angle_sum", "your angle is position + frequency instead of position × frequency",
            dict(angle="p+w")),
    mistake("sinusoidal_encoding", "angle_without_position",
            "your angle leaves the position out, so every row is the same: the angle is position × frequency",
            dict(angle="w")),
    mistake("sinusoidal_encoding", "exp_without_log",
            "your frequencies are exp(-10000·2i/d_model), all 0 but the first: exp needs the log of the base, "
            "exp(-2i·math.log(10000)/d_model) = 10000^(-2i/d_model)", dict(base=math.inf)),
    mistake("sinusoidal_encoding", "sin_cos_halves",
            "your table puts the sines in the first half of the columns and the cosines in the second "
            "(torch.cat([sin, cos], dim=-1)): they are interleaved, the sine of pair i in column 2i (pe[:, 0::2]) "
            "and its cosine in column 2i+1 (pe[:, 1::2])", dict(layout="halves")),
    mistake("sinusoidal_encoding", "cos_sin_halves",
            "your table puts the cosines in the first half of the columns and the sines in the second "
            "(torch.cat([cos, sin], dim=-1)): they are interleaved, the sine of pair i in column 2i (pe[:, 0::2]) "
            "and its cosine in column 2i+1 (pe[:, 1::2])", dict(layout="halves", even=torch.cos, odd=torch.sin)),
)
TABLE_SHAPE_MISTAKES = (
    mistake("sinusoidal_encoding", "batch_dimension",
            "your table has a leading batch dimension, (1, max_len, d_model): return the (max_len, d_model) table",
            lambda max_len, d_model: torch.Size((1, max_len, d_model))),
    mistake("sinusoidal_encoding", "table_transposed",
            "your table is transposed, (d_model, max_len): one row per position",
            lambda max_len, d_model: torch.Size((d_model, max_len))),
)


OTHER_BASE = mistake("sinusoidal_encoding", "other_base",
                     "your wavelengths use the base {base:.3g} instead of 10000",
                     lambda max_len, d_model, base: table(max_len, d_model, base=base))
# A base of 10000 ** k is the exponent k times too large (the values cannot tell which was written; this is
# the mistake people make: an arange(0, d, 2) that already gives 2i, multiplied by 2 again).
EXPONENT_TIMES = mistake("sinusoidal_encoding", "exponent_times",
                         "your exponent is {k:g} times too large, 10000^(-{k:g}·2i/d_model) (as if the base were "
                         "{base:.3g}): it is 2i/d_model, with i counting the pairs (arange(0, d_model, 2) already "
                         "gives 2i)", lambda max_len, d_model, base: table(max_len, d_model, base=base))
EXPONENT_FACTORS = (2.0, 3.0, 4.0, 0.5)
# Every frequency 1 (a base of 1): what an exponent of integers floor-divided gives, 2i // d_model = 0.
EXPONENT_FLOORED = mistake("sinusoidal_encoding", "exponent_floored",
                           "your frequencies are all 1, every pair turning by 1 radian a position: the exponent "
                           "2i / d_model came out 0, as the integer division arange(0, d_model, 2) // d_model "
                           "gives; divide as floats, torch.arange(0, d_model, 2) / d_model",
                           lambda max_len, d_model: table(max_len, d_model, base=1.0))


TABLE_EXPONENT = mistake(
    "sinusoidal_encoding", "exponent_offsets",
    "your frequencies are 10000**(-{numerator} / {denominator}): they are 10000**(-2i / d_model), i counting "
    "the pairs from 0, so columns 0 and 1 turn by 1 radian a position", dict())


def table_mistakes(max_len: int, d_model: int, got: Any = None) -> Mistakes:
    """For the (max_len, d_model) table; given what came back, also a base no entry names, fitted to it, and
    the exponent off by EXPONENT_OFFSETS (exponent_over_d_minus_1 is (0, -1))."""
    family = {text: (lambda k=k: table(max_len, d_model, numerator=k[0], denominator=k[1]))
              for text, k in exponent_texts(TABLE_EXPONENT, "d_model", (0, -1)).items()}
    return {**simulated(TABLE_MISTAKES, lambda **switches: table(max_len, d_model, **switches)),
            **_other_base(max_len, d_model, got), **family}


def _other_base(max_len: int, d_model: int, got: Any) -> Mistakes:
    """The table with the base that `got`'s pair 1 frequency implies (PE[1, 2] = sin(base ** (-2 / d)))."""
    if not isinstance(got, Tensor) or tuple(got.shape) != (max_len, d_model) or max_len < 2 or d_model < 4:
        return {}
    value = float(got[1, 2])
    if not 0 < value < math.sin(1.0):  # a base above 1 turns pair 1 by less than a radian a position
        return {}
    base = math.asin(value) ** (-d_model / 2)
    # another denominator d_model + k is the base 10000 ** (d_model / (d_model + k)), whose value depends on
    # d_model: the entry that names the denominator is the one that holds for every case
    denominators = [10000.0 ** (d_model / (d_model + k)) for k in {b for _, b in EXPONENT_OFFSETS} if d_model + k > 0]
    if not math.isfinite(base) or any(math.isclose(base, b, rel_tol=1e-2) for b in (10000.0, 1000.0, *denominators)):
        return {}
    if math.isclose(base, 1.0, rel_tol=1e-2):
        return bind([EXPONENT_FLOORED], max_len, d_model)
    k = next((k for k in EXPONENT_FACTORS if math.isclose(base, 10000.0 ** k, rel_tol=1e-2)), None)
    if k is not None:
        return bind([EXPONENT_TIMES], max_len, d_model, 10000.0 ** k, k=k, base=10000.0 ** k)
    return bind([OTHER_BASE], max_len, d_model, base, base=base)


TABLE_CACHED_BY_MAX_LEN = mistake(
    "sinusoidal_encoding", "table_cached_by_max_len",
    "your function keeps the table of an earlier call with the same max_len and returns it for another d_model (a "
    "cache whose key leaves out d_model): build the table of each call's own max_len and d_model",
    lambda max_len, earlier: table(max_len, earlier))


def table_again_mistakes(max_len: int, d_model: int, earlier: int, got: Any = None, *, shape: bool = False
                         ) -> Mistakes:
    """For the (max_len, d_model) table asked after one of the same max_len and d_model `earlier` (its shape's
    mistakes where `shape`, else its values')."""
    stale = {} if earlier == d_model else bind([TABLE_CACHED_BY_MAX_LEN], max_len, earlier)
    return {**(table_shape_mistakes(max_len, d_model) if shape else table_mistakes(max_len, d_model, got)), **stale}


def table_shape_mistakes(max_len: int, d_model: int) -> Mistakes:
    return bind(TABLE_SHAPE_MISTAKES, max_len, d_model)
