"""rope: `rope_angles`, `apply_rope` in rope.py (rotary position embeddings, adjacent pairs).

PyTorch has no RoPE. The tables are compared with the contract's formula computed
here in float64; `apply_rope` gets tables made here (never the submission's own, so
a wrong `rope_angles` costs only its own checks) and is compared with another
formulation: each adjacent pair (2i, 2i+1) read as the complex number
x[2i] + 1j * x[2i+1], multiplied by cos + 1j * sin of its position's row.
Every comparison uses float32's tolerance, float64 inputs too (the contract's).
"""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, assert_equal, assert_not_close, check_tensor, fail, shown
from checklib.mistakes import rope as mistakes
from checklib.mistakes.general import mapped
from checklib.student import expect_value_error
from checklib.tolerance import ATOL, RTOL
from checklib.weights import randn
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

EPS32 = torch.finfo(torch.float32).eps
ANGLES = "cos[p, i] = cos(p * base**(-2i / head_dim)), likewise sin, positions p from 0, one column per pair i"
ROTATION = ("with c = cos[positions[t], i], s = sin[positions[t], i]: out[..., t, 2i] = x[..., t, 2i] * c - "
            "x[..., t, 2i+1] * s and out[..., t, 2i+1] = x[..., t, 2i] * s + x[..., t, 2i+1] * c (adjacent pairs)")
# Position blocks checked with their own tolerance: float32's rounding of the angle p * theta_i
# grows with p, so the error allowed at a position is proportional to it (never below 1e-5).
BLOCKS = [(0, 64), (64, 512), (512, 4096)]


def angles(max_len: int, head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """(max_len, head_dim/2): p * base**(-2i/head_dim) in float64."""
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    return torch.arange(max_len, dtype=torch.float64).unsqueeze(1) * freqs


def tables(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The contract's float32 tables, rounded once from float64: what apply_rope's checks hand it."""
    a = angles(max_len, head_dim, base)
    return a.cos().float(), a.sin().float()


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
            positions: torch.Tensor | None = None) -> torch.Tensor:
    """apply_rope as complex multiplication, in float64."""
    positions = torch.arange(x.shape[-2]) if positions is None else positions
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    turn = torch.complex(cos.double()[positions], sin.double()[positions])
    return torch.view_as_real(pairs * turn).reshape(x.shape)


def angle_atol(last_position: int) -> float:
    return max(1e-5, 8 * EPS32 * last_position)


def call_angles(impl, max_len: int, head_dim: int, base: float | None = None):
    """rope_angles's result, checked to be two float32 (max_len, head_dim // 2) tables; `base=None` uses the default."""
    args = f"{max_len}, {head_dim}" + ("" if base is None else f", base={base:g}")
    what = f"rope_angles({args})"
    fn = adapters.rope_angles(impl)
    result = fn(max_len, head_dim) if base is None else fn(max_len, head_dim, base=base)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail(what, Phrase('expected a pair (cos, sin), got {shown_result}', shown_result=shown(result)), actual=result,
             hint="return two tables, cos first: return angles.cos(), angles.sin()",
             mistakes=mistakes.rope_table_pair_mistakes(result))
    for name, table in zip(("cos", "sin"), result):
        table_mistakes = mistakes.rope_table_shape_mistakes(max_len, head_dim)
        if isinstance(table, torch.Tensor):
            table_mistakes.update(mistakes.rope_table_dtype_mistakes(table))
        check_tensor(table, what=Phrase("the {name} table of {what}", name=name, what=what), shape=(max_len, head_dim // 2), dtype=torch.float32,
                     hint="each table is float32 (max_len, head_dim // 2): one row per position, one column per pair",
                     mistakes=table_mistakes)
    return result


def call_rope(impl, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor | None, what: str):
    """apply_rope's result, checked to have x's shape and dtype."""
    fn = adapters.apply_rope(impl)
    out = fn(x, cos, sin) if positions is None else fn(x, cos, sin, positions)
    check_tensor(out, what=what, shape=x.shape, hint="apply_rope returns a tensor of x's shape and dtype",
                 mistakes=mistakes.rope_mistakes(x, cos, sin, positions))
    if out.dtype != x.dtype:
        fail(what, Phrase("expected dtype {x_dtype}, got {out_dtype}", x_dtype=x.dtype, out_dtype=out.dtype), actual=out.dtype,
             hint="cast the tables' rows to x's dtype (or the result back to it): the output has x's dtype",
             mistakes=mistakes.rope_dtype_mistakes(x))
    return out


def label(x: torch.Tensor, max_len: int, positions: torch.Tensor | None) -> str:
    at = "" if positions is None else f", positions={positions.tolist()}"
    return Phrase("apply_rope(x {tuple_x_shape} {str_x_dtype_6}, tables of {max_len} positions{at})",
                  tuple_x_shape=tuple(x.shape), str_x_dtype_6=str(x.dtype)[6:], max_len=max_len, at=at)


# --- rope_angles ---------------------------------------------------------------------------------------

# (max_len, head_dim): a single position, a single pair, an odd number of pairs, usual sizes, a long table.
SIZES = [(1, 2), (9, 2), (10, 6), (50, 16), (128, 64), (4096, 32)]


@pytest.mark.parametrize("max_len, head_dim", SIZES, ids=lambda v: str(v))
def test_rope_angles_shape_and_dtype(impl, max_len, head_dim):
    call_angles(impl, max_len, head_dim)


# (max_len, head_dim, base): from two positions up (one position is cos 1, sin 0, which ones and zeros
# get right without the work); None is the default base; LLaMA 3's 500000 and a small base.
ANGLE_CASES = [(2, 2, None), (10, 6, None), (50, 16, None), (128, 64, None), (4096, 32, None),
               (300, 8, 500000.0), (20, 12, 100.0)]


@pytest.mark.parametrize("max_len, head_dim, base", ANGLE_CASES,
                         ids=[f"{m}x{d}-base{b or 10000:g}" for m, d, b in ANGLE_CASES])
def test_rope_angles_values(impl, max_len, head_dim, base):
    cos, sin = call_angles(impl, max_len, head_dim, base)
    expected = angles(max_len, head_dim, 10000.0 if base is None else base)
    table_mistakes = mistakes.rope_table_mistakes(max_len, head_dim, 10000.0 if base is None else base)
    what = f"rope_angles({max_len}, {head_dim}" + ("" if base is None else f", base={base:g}") + ")"
    hint = Phrase("{ANGLES}; check the exponent 2i / head_dim (i counts pairs), its sign, and that positions start "
                  "at 0", ANGLES=ANGLES)
    for index, (name, got, want) in enumerate((("cos", cos, expected.cos()), ("sin", sin, expected.sin()))):
        for start, stop in BLOCKS:
            if start >= max_len:
                break
            stop = min(stop, max_len)
            assert_close(got[start:stop].double(), want[start:stop], what=Phrase("the {name} table of {what}, positions "
                                                                                 "{start}..{stop_1}", name=name,
                                                                                 what=what, start=start,
                                                                                 stop_1=stop - 1), hint=hint, rtol=RTOL, atol=angle_atol(stop - 1),
                         mistakes=mapped(table_mistakes, lambda t, i=index, a=start, b=stop: t[i][a:b]))


@pytest.mark.parametrize("head_dim", [1, 7, 15])
def test_rope_angles_rejects_odd_head_dim(impl, head_dim):
    message = expect_value_error(adapters.rope_angles(impl), 16, head_dim, what=f"rope_angles(16, {head_dim})")
    assert message, "the ValueError should say what is wrong (head_dim must be even: features come in pairs)"


@pytest.mark.parametrize("max_len, head_dim", [(0, 8), (-3, 8), (10, 0), (10, -4)])
def test_rope_angles_rejects_non_positive_sizes(impl, max_len, head_dim):
    message = expect_value_error(adapters.rope_angles(impl), max_len, head_dim,
                                 what=f"rope_angles({max_len}, {head_dim})")
    assert message, "the ValueError should say what is wrong (max_len and head_dim must be positive)"


# --- apply_rope ----------------------------------------------------------------------------------------

# (x shape, max_len, base, dtype): (B, H, T, Dh) with longer tables and with max_len == T, (T, Dh),
# (B, T, Dh) with a single pair, five dimensions, a realistic head size; T >= 2 everywhere, since
# position 0 alone is the identity, which an echoed x gets right.
CASES = [
    ((2, 3, 7, 8), 16, 10000.0, torch.float32),
    ((2, 3, 7, 8), 7, 10000.0, torch.float64),
    ((5, 6), 5, 10000.0, torch.float32),
    ((3, 9, 2), 12, 10000.0, torch.float64),
    ((1, 2, 3, 5, 16), 8, 500000.0, torch.float32),
    ((2, 1, 64, 32), 64, 10000.0, torch.float32),
    ((1, 4, 33, 128), 40, 10000.0, torch.float64),
]


@pytest.mark.parametrize("shape, max_len, base, dtype", CASES,
                         ids=[f"{'x'.join(map(str, s))}-len{m}-{str(d)[6:]}" for s, m, b, d in CASES])
def test_apply_rope_matches_complex_rotation(impl, gen, shape, max_len, base, dtype):
    """Default positions 0 .. T-1 (the first T rows of the tables)."""
    x = randn(*shape, gen=gen, dtype=dtype, scale=2.0)
    cos, sin = tables(max_len, shape[-1], base)
    what = label(x, max_len, None)
    out = call_rope(impl, x, cos, sin, None, what)
    assert_close(out, rotated(x, cos, sin).to(dtype), what=Phrase("{what} vs the pairs as complex numbers times "
                                                                  "cos + 1j * sin", what=what), hint=ROTATION + "; positions default to 0 .. T-1", rtol=RTOL, atol=ATOL,
                 mistakes=mistakes.rope_mistakes(x, cos, sin, None))


# (x shape, max_len, positions, dtype): unsorted and repeated positions, one decoding step after a
# cache of 41 positions, a chunk far along a long table.
POSITION_CASES = [
    ((2, 2, 4, 8), 256, [3, 17, 4, 250], torch.float32),
    ((1, 3, 1, 16), 64, [41], torch.float64),
    ((2, 5, 12), 4096, [1000, 1001, 1002, 1003, 4095], torch.float32),
    ((3, 6), 10, [9, 0, 9], torch.float64),
    ((1, 2, 6, 64), 100, [37, 38, 39, 40, 41, 42], torch.float32),
]


@pytest.mark.parametrize("shape, max_len, positions, dtype", POSITION_CASES,
                         ids=[f"{'x'.join(map(str, s))}-at{p[0]}-{str(d)[6:]}" for s, m, p, d in POSITION_CASES])
def test_apply_rope_at_given_positions(impl, gen, shape, max_len, positions, dtype):
    x = randn(*shape, gen=gen, dtype=dtype, scale=2.0)
    cos, sin = tables(max_len, shape[-1])
    at = torch.tensor(positions, dtype=torch.int64)
    what = label(x, max_len, at)
    out = call_rope(impl, x, cos, sin, at, what)
    assert_close(out, rotated(x, cos, sin, at).to(dtype), what=Phrase("{what} vs the pairs as complex numbers "
                                                                      "times cos + 1j * sin", what=what), hint=ROTATION + "; row t of x uses row positions[t] of the tables",
                 rtol=RTOL, atol=ATOL, mistakes=mistakes.rope_mistakes(x, cos, sin, at))


# Calls through the same table objects, as a model makes them with its buffers: three of length 3, then three of
# length 1 (cached decoding), each at other positions than the one before.
SAME_TABLE_CALLS = [[2, 3, 4], [5, 6, 7], None, [3], [4], [9]]


def test_same_tables_at_other_positions(impl, gen):
    """Nothing that apply_rope keeps from one call (rows looked up, say) may change a later call's answer."""
    cos, sin = tables(16, 8)
    held = adapters.apply_rope_with_tables(impl, cos, sin)
    first: dict[int, torch.Tensor] = {}
    for call, at in enumerate(SAME_TABLE_CALLS, 1):
        rows = torch.arange(3) if at is None else torch.tensor(at, dtype=torch.int64)
        earlier = first.setdefault(len(rows), rows)
        x = randn(2, 2, len(rows), 8, gen=gen)
        asked = "None" if at is None else at
        what = Phrase("call {call} of apply_rope with the same cos and sin tensors each time, x {tuple_x_shape}, "
                      "positions={asked}", call=call, tuple_x_shape=tuple(x.shape), asked=asked)
        out = held(x) if at is None else held(x, rows)
        check_tensor(out, what=what, shape=x.shape, dtype=x.dtype, hint="apply_rope returns a tensor of x's shape and dtype")
        assert_close(out, rotated(x, cos, sin, rows).to(x.dtype), what=what, rtol=RTOL, atol=ATOL,
                     hint="a model hands apply_rope the same tables on every call: look up the rows of each call's own "
                          "positions, and keep nothing from one call to the next",
                     mistakes=mistakes.rope_stale_mistakes(x, cos, sin, rows, earlier))


def test_score_depends_only_on_distance(impl, gen):
    """One query and one key at every position: q_m . k_n depends on m - n only, and does depend on it."""
    length, d_head, max_len = 24, 16, 512
    cos, sin = tables(max_len, d_head)
    q = randn(d_head, gen=gen, dtype=torch.float64).expand(1, 1, length, d_head).contiguous()
    k = randn(d_head, gen=gen, dtype=torch.float64).expand(1, 1, length, d_head).contiguous()

    def scores(start: int) -> torch.Tensor:
        at = torch.arange(start, start + length)
        what = label(q, max_len, at)
        rq, rk = call_rope(impl, q, cos, sin, at, what), call_rope(impl, k, cos, sin, at, what)
        return (rq @ rk.transpose(-2, -1))[0, 0]

    hint = ("rotating q at m and k at n by angles proportional to their positions leaves q_m . k_n depending on "
            "m - n only; " + ROTATION)
    base = scores(0)
    assert_close(base[1:, 1:], base[:-1, :-1], rtol=RTOL, atol=ATOL, hint=hint,
                 what=Phrase("the scores q_(m+1) . k_(n+1) against q_m . k_n (positions 0..{length_1})",
                             length_1=length - 1))
    for start in (5, 300):
        assert_close(scores(start), base, rtol=RTOL, atol=ATOL, hint=hint,
                     what=Phrase("the scores of q and k at positions {start}..{start_length_1} against those at "
                                 "0..{length_1}", start=start, start_length_1=start + length - 1,
                                 length_1=length - 1))
    assert_not_close(base[0, 1:], base[0, :-1], what="the scores q_0 . k_n for growing n",
                     hint="the score must change with the distance m - n: RoPE rotates each pair by its position")


def test_keeps_norms(impl, gen):
    """A rotation keeps the length of every vector, and of every adjacent pair."""
    max_len = 1024
    x = randn(2, 3, 10, 12, gen=gen, dtype=torch.float64, scale=3.0)
    cos, sin = tables(max_len, 12)
    at = torch.randint(0, max_len, (10,), generator=gen)
    what = label(x, max_len, at)
    out = call_rope(impl, x, cos, sin, at, what)
    assert_close(out.norm(dim=-1), x.norm(dim=-1), what=Phrase("the norm of every row of {what}", what=what), rtol=RTOL, atol=ATOL,
                 hint="each pair is turned, never stretched: " + ROTATION)

    def pair_norms(t: torch.Tensor) -> torch.Tensor:
        return t[..., 0::2].double() ** 2 + t[..., 1::2].double() ** 2

    assert_close(pair_norms(out), pair_norms(x), what=Phrase("the squared norm of every pair (2i, 2i+1) of {what}",
                                                             what=what),
                 rtol=RTOL, atol=ATOL, hint="each adjacent pair (2i, 2i+1) is turned on its own: " + ROTATION,
                 mistakes=mapped(mistakes.rope_mistakes(x, cos, sin, at), pair_norms))


def test_gradient_flows_to_x(impl, gen):
    max_len = 32
    x = randn(2, 2, 5, 8, gen=gen, dtype=torch.float64)
    g = randn(2, 2, 5, 8, gen=gen, dtype=torch.float64)
    cos, sin = tables(max_len, 8)
    at = torch.tensor([3, 4, 5, 6, 30])
    what = Phrase('the gradient of {label_x_max_len_at} w.r.t. x', label_x_max_len_at=label(x, max_len, at))
    hint = "compute the output from x with differentiable tensor operations (no torch.no_grad(), no .detach())"
    try:
        grads = adapters.apply_rope(impl).grad(x, cos, sin, at, grad_output=g)
    except StudentError as exc:
        if type(exc) is not StudentError or "does not require grad" not in exc.message:
            raise
        fail(what, "the output is not connected to x: backpropagating through it found no graph", hint=hint,
             actual=mistakes.ROPE_NO_GRAPH, mistakes=mistakes.rope_grad_mistakes())
    x_ref = x.clone().requires_grad_(True)
    (rotated(x_ref, cos, sin, at) * g).sum().backward()
    got = grads["args"][0]
    if got is None:
        fail(what, "no gradient reached x", hint=hint, actual=mistakes.ROPE_NO_GRAPH,
             mistakes=mistakes.rope_grad_mistakes())
    assert_close(got, x_ref.grad, what=Phrase("{what} vs the complex rotation's (a turn back by the same angle)",
                                              what=what),
                 rtol=RTOL, atol=ATOL, hint=hint)


def test_does_not_modify_inputs(impl, gen):
    x = randn(2, 3, 6, 8, gen=gen)
    cos, sin = tables(16, 8)
    at = torch.tensor([1, 2, 3, 9, 10, 15])
    _, (x_after, cos_after, sin_after, at_after) = adapters.apply_rope(impl).call_returning_args(x, cos, sin, at)
    hint = "functions must not modify their inputs in place: build the result in new tensors"
    assert_equal(x_after, x, what="x after apply_rope(x, cos, sin, positions)", hint=hint,
                 mistakes=mistakes.rope_in_place_mistakes(x, cos, sin, at))
    for name, after, before in (("cos", cos_after, cos), ("sin", sin_after, sin), ("positions", at_after, at)):
        assert_equal(after, before, what=Phrase("{name} after apply_rope(x, cos, sin, positions)", name=name), hint=hint)


@pytest.mark.parametrize("d_head, width", [(8, 3), (8, 8), (6, 2), (4, 16)],
                         ids=["Dh8-tables6", "Dh8-tables16", "Dh6-tables4", "Dh4-tables32"])
def test_apply_rope_rejects_mismatched_tables(impl, gen, d_head, width):
    x = randn(1, 2, 5, d_head, gen=gen)
    cos, sin = tables(10, 2 * width)
    message = expect_value_error(adapters.apply_rope(impl), x, cos, sin,
                                 what=Phrase("apply_rope(x (1, 2, 5, {d_head}), tables (10, {width}))",
                                             d_head=d_head, width=width))
    assert message, "the ValueError should say what is wrong (Dh must be twice the tables' width)"


# (T, positions; None for the default 0 .. T-1), tables of 10 positions.
OUTSIDE = [(3, [0, 5, 10]), (3, [11, 2, 3]), (3, [-1, 0, 1]), (3, [2, -10, 4]), (12, None)]


@pytest.mark.parametrize("length, positions", OUTSIDE,
                         ids=["at_max_len", "above_max_len", "minus_one", "minus_max_len", "default_beyond_tables"])
def test_apply_rope_rejects_positions_outside_the_tables(impl, gen, length, positions):
    x = randn(2, length, 8, gen=gen)
    cos, sin = tables(10, 8)
    at = None if positions is None else torch.tensor(positions, dtype=torch.int64)
    what = Phrase("apply_rope(x (2, {length}, 8), tables of 10 positions{if_at_is_None_else_f_positions_positions})",
                  length=length,
                  if_at_is_None_else_f_positions_positions='' if at is None else f', positions={positions}')
    returned = []

    def call(*args):
        returned.append(adapters.apply_rope(impl)(*args))
        return returned[-1]

    try:
        message = expect_value_error(call, *((x, cos, sin) if at is None else (x, cos, sin, at)), what=what)
    except AssertionError:
        if not returned or at is None:
            raise
        fail(what, Phrase("expected a ValueError, but it returned {shown_returned_1}",
                          shown_returned_1=shown(returned[-1])), actual=returned[-1],
             hint="positions must lie in 0 .. max_len - 1, negative ones too are outside the tables",
             mistakes=mistakes.rope_wrapped_mistakes(x, cos, sin, at))
    assert message, "the ValueError should say what is wrong (a position outside the tables)"
