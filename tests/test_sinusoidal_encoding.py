"""sinusoidal_encoding: `sinusoidal_positional_encoding` in positional.py."""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, assert_not_close, check_tensor, fail
from checklib.mistakes import sinusoidal_encoding as mistakes
from checklib.mistakes.general import mapped
from checklib.student import expect_value_error
from checklib.weights import mha_state, randn, torch_mha
from grader.text import Phrase

# (max_len, d_model): a single position, the smallest d_model, usual sizes, a long table.
SIZES = [(1, 2), (10, 6), (50, 16), (128, 64), (3000, 32)]
# The values are checked from two positions up: a one-position table is sin(0) = 0 and cos(0) = 1,
# which a table of zeros (or ones) gets half right without the work.
VALUE_SIZES = [(2, 2), *SIZES[1:]]
FORMULA = "PE[p, 2i] = sin(p / 10000^(2i/d_model)), PE[p, 2i+1] = cos(p / 10000^(2i/d_model)), p from 0"
EPS32 = torch.finfo(torch.float32).eps
# Position blocks checked with their own tolerance: float32's rounding of the angle p * w_i
# grows with p, so the error allowed at a position is proportional to it (never below 1e-5).
BLOCKS = [(0, 64), (64, 512), (512, 4096)]


def frequencies(d_model: int) -> torch.Tensor:
    """w_i = 10000^(-2i/d_model) for i = 0 .. d_model/2 - 1, in float64."""
    return torch.pow(10000.0, -torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)


def angles(max_len: int, d_model: int) -> torch.Tensor:
    """(max_len, d_model/2): p * w_i in float64."""
    return torch.arange(max_len, dtype=torch.float64).unsqueeze(1) * frequencies(d_model)


def angle_atol(last_position: int) -> float:
    return max(1e-5, 8 * EPS32 * last_position)


def assert_close_by_position(actual, expected, *, what: str, hint: str, mistakes=None) -> None:
    """Rows (positions) compared block by block, each block allowing float32's angle rounding."""
    check_tensor(actual, what=what, shape=expected.shape, hint=hint, mistakes=mistakes)
    for start, stop in BLOCKS:
        if start >= expected.shape[0]:
            break
        stop = min(stop, expected.shape[0])
        assert_close(actual[start:stop].to(torch.float64), expected[start:stop],
                     what=Phrase("{what}, positions {start}..{stop_1}", what=what, start=start, stop_1=stop - 1), hint=hint, atol=angle_atol(stop - 1),
                     mistakes=_rows(mistakes, start, stop))


def _rows(table_mistakes, start: int, stop: int):
    return table_mistakes and mapped(table_mistakes, lambda t: t[start:stop])


def encoding(impl, max_len: int, d_model: int) -> torch.Tensor:
    pe = adapters.sinusoidal_positional_encoding(impl)(max_len, d_model)
    return check_tensor(pe, what=f"sinusoidal_positional_encoding({max_len}, {d_model})",
                        shape=(max_len, d_model), dtype=torch.float32,
                        hint="the table is float32 (max_len, d_model): one row per position, one column per feature",
                        mistakes=mistakes.table_shape_mistakes(max_len, d_model))


# One max_len with other d_models, and one d_model with other max_lens, in one round trip: nothing that one call
# keeps (a table cached under max_len alone, or under d_model alone) may answer another.
AGAIN_SIZES = [(16, 8), (16, 12), (40, 8), (16, 4), (8, 8), (40, 12)]


def test_asked_again_with_other_sizes(impl):
    outs = adapters.sinusoidal_positional_encoding(impl).map(AGAIN_SIZES)
    for call, ((max_len, d_model), pe) in enumerate(zip(AGAIN_SIZES, outs), 1):
        earlier = next(d for length, d in AGAIN_SIZES if length == max_len)  # the first asked with this max_len
        what = Phrase("sinusoidal_positional_encoding({max_len}, {d_model}), call {call} of {len_AGAIN_SIZES} in a "
                      "row", max_len=max_len, d_model=d_model, call=call, len_AGAIN_SIZES=len(AGAIN_SIZES))
        check_tensor(pe, what=what, shape=(max_len, d_model), dtype=torch.float32,
                     hint="the table is float32 (max_len, d_model): one row per position, one column per feature",
                     mistakes=mistakes.table_again_mistakes(max_len, d_model, earlier, shape=True))
        expected = torch.stack((torch.sin(angles(max_len, d_model)), torch.cos(angles(max_len, d_model))), dim=-1)
        assert_close(pe.to(torch.float64), expected.reshape(max_len, d_model), what=what, atol=angle_atol(max_len - 1),
                     hint=Phrase("{FORMULA}; build each call's table from its own max_len and d_model, and keep "
                                 "nothing from one call to the next", FORMULA=FORMULA),
                     mistakes=mistakes.table_again_mistakes(max_len, d_model, earlier, pe))


@pytest.mark.parametrize("max_len, d_model", SIZES, ids=lambda v: str(v))
def test_shape_and_dtype(impl, max_len, d_model):
    encoding(impl, max_len, d_model)


@pytest.mark.parametrize("max_len, d_model", VALUE_SIZES, ids=lambda v: str(v))
def test_even_columns_are_sines(impl, max_len, d_model):
    pe = encoding(impl, max_len, d_model)
    assert_close_by_position(pe[:, 0::2], torch.sin(angles(max_len, d_model)),
                             what=Phrase("PE[:, 0::2] (the even columns) of "
                                         "sinusoidal_positional_encoding({max_len}, {d_model})", max_len=max_len,
                                         d_model=d_model),
                             hint=Phrase("even columns hold the sines: {FORMULA}; check sin/cos order, the "
                                         "exponent 2i/d_model (i counts pairs, not columns) and the base 10000",
                                         FORMULA=FORMULA),
                             mistakes=mapped(mistakes.table_mistakes(max_len, d_model, pe), lambda t: t[:, 0::2]))


@pytest.mark.parametrize("max_len, d_model", VALUE_SIZES, ids=lambda v: str(v))
def test_odd_columns_are_cosines(impl, max_len, d_model):
    pe = encoding(impl, max_len, d_model)
    assert_close_by_position(pe[:, 1::2], torch.cos(angles(max_len, d_model)),
                             what=Phrase("PE[:, 1::2] (the odd columns) of "
                                         "sinusoidal_positional_encoding({max_len}, {d_model})", max_len=max_len,
                                         d_model=d_model),
                             hint=Phrase("odd columns hold the cosines of the same angle as the sine just before "
                                         "them: {FORMULA}", FORMULA=FORMULA),
                             mistakes=mapped(mistakes.table_mistakes(max_len, d_model, pe), lambda t: t[:, 1::2]))


@pytest.mark.parametrize("d_model", [2, 8, 30])
def test_position_zero(impl, d_model):
    pe = encoding(impl, 5, d_model)
    table_mistakes = mistakes.table_mistakes(5, d_model)
    assert_close(pe[0, 0::2], torch.zeros(d_model // 2),
                 what=Phrase('PE[0, 0::2] (sines at position 0, d_model={d_model})', d_model=d_model),
                 hint="positions start at 0, and sin(0) = 0", mistakes=mapped(table_mistakes, lambda t: t[0, 0::2]))
    assert_close(pe[0, 1::2], torch.ones(d_model // 2),
                 what=Phrase('PE[0, 1::2] (cosines at position 0, d_model={d_model})', d_model=d_model),
                 hint="positions start at 0, and cos(0) = 1", mistakes=mapped(table_mistakes, lambda t: t[0, 1::2]))


@pytest.mark.parametrize("shift", [1, 3, 17])
@pytest.mark.parametrize("d_model", [8, 24])
def test_shift_is_a_rotation(impl, d_model, shift):
    """PE(p + k) is PE(p) with each (sin, cos) pair rotated by k * w_i, the same rotation for every p."""
    max_len = 64
    pe = encoding(impl, max_len, d_model).to(torch.float64)
    sines, cosines = pe[:, 0::2], pe[:, 1::2]
    turn = shift * frequencies(d_model)  # the rotation angle of pair i
    rotated_sines = sines[:-shift] * torch.cos(turn) + cosines[:-shift] * torch.sin(turn)
    rotated_cosines = cosines[:-shift] * torch.cos(turn) - sines[:-shift] * torch.sin(turn)
    hint = (Phrase("sin(a + b) = sin a cos b + cos a sin b and cos(a + b) = cos a cos b - sin a sin b: with "
                   "{FORMULA}, moving {shift} positions on turns pair i by {shift} * 10000^(-2i/d_model) whatever "
                   "the position", FORMULA=FORMULA, shift=shift))
    atol = angle_atol(2 * max_len)
    table_mistakes = mistakes.table_mistakes(max_len, d_model, pe)  # what a mistake's table gives here
    assert_close(sines[shift:], rotated_sines, atol=atol, hint=hint,
                 what=Phrase("PE[p + {shift}, 0::2] against PE[p] rotated by {shift} * w_i (d_model={d_model})",
                             shift=shift, d_model=d_model),
                 mistakes=mapped(table_mistakes, lambda t: t[shift:, 0::2]))
    assert_close(cosines[shift:], rotated_cosines, atol=atol, hint=hint,
                 what=Phrase("PE[p + {shift}, 1::2] against PE[p] rotated by {shift} * w_i (d_model={d_model})",
                             shift=shift, d_model=d_model),
                 mistakes=mapped(table_mistakes, lambda t: t[shift:, 1::2]))


@pytest.mark.parametrize("length, d_model, n_heads", [(12, 16, 4), (6, 8, 2)])
def test_breaks_permutation_equivariance(impl, gen, length, d_model, n_heads):
    """Attention alone cannot tell positions apart; adding the encoding must let it."""
    mha = torch_mha(mha_state(d_model, gen=gen), d_model, n_heads)
    x = randn(1, length, d_model, gen=gen)
    order = torch.roll(torch.arange(length), 1)

    def attend(inputs: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return mha(inputs, inputs, inputs, need_weights=False)[0]

    # Grader-side sanity: without positions, permuting the input only permutes the output.
    assert torch.allclose(attend(x[:, order]), attend(x)[:, order], atol=1e-5), "grader error: MHA not equivariant"

    pe = encoding(impl, length, d_model)
    distances = torch.cdist(pe.to(torch.float64), pe.to(torch.float64))
    distances.fill_diagonal_(float("inf"))
    p, q = divmod(int(distances.argmin()), length)
    if not distances.min() > 1e-3:
        fail(f"sinusoidal_positional_encoding({length}, {d_model})",
             Phrase('rows {p} and {q} are (nearly) equal, but every position needs its own encoding', p=p, q=q),
             hint="the angle of each entry is position * frequency")
    assert_not_close(attend(x[:, order] + pe), attend(x + pe)[:, order],
                     what=Phrase("nn.MultiheadAttention(x[perm] + PE) against nn.MultiheadAttention(x + PE)[perm] "
                                 "(T={length})", length=length),
                     hint="with the encoding added, the same tokens in another order must give other outputs")


@pytest.mark.parametrize("d_model", [1, 7, 15])
def test_rejects_odd_d_model(impl, d_model):
    message = expect_value_error(adapters.sinusoidal_positional_encoding(impl), 10, d_model,
                                 what=f"sinusoidal_positional_encoding(10, {d_model})")
    assert message, "the ValueError should say what is wrong (d_model must be even)"


@pytest.mark.parametrize("max_len, d_model", [(0, 8), (-3, 8), (10, 0), (10, -4)])
def test_rejects_non_positive_sizes(impl, max_len, d_model):
    message = expect_value_error(adapters.sinusoidal_positional_encoding(impl), max_len, d_model,
                                 what=f"sinusoidal_positional_encoding({max_len}, {d_model})")
    assert message, "the ValueError should say what is wrong (max_len and d_model must be positive)"
