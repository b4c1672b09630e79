"""The known mistakes of `rope` (Rotary position embeddings (RoPE)): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, simulated, variants
from .general import besides
from .sinusoidal_encoding import exponent_texts


def rope_tables(max_len: int, head_dim: int, base: float = 10000.0, *, variant: str = "",
                exponent_offsets: tuple[int, int] = (0, 0)) -> tuple[Tensor, Tensor]:
    """(cos, sin), each (max_len, head_dim / 2), in float64, with the mistake `variant` switched on, or the
    exponent (2i + a) / (head_dim + b) of `exponent_offsets` (a, b).

    `float16` computes the angles as that mistake does (float16 positions times float16 frequencies),
    and `no_minus` in float32: their angles are large, so the rounding of the mistake's own dtype decides.
    """
    features = torch.arange(0, head_dim, 2, dtype=torch.float64)  # 2i
    a, b = exponent_offsets
    exponent = {"pair_index": features / 2, "off_by_one": features - 2, "exponent_doubled": 2 * features}.get(
        variant, features + a) / (head_dim + b)
    base = 10000.0 if variant == "base_ignored" else base
    freqs = base ** (exponent if variant == "no_minus" else -exponent)
    positions = torch.arange(max_len, dtype=torch.float64) + (1 if variant == "from_one" else 0)
    if variant == "float16":
        angles = torch.outer(torch.arange(max_len, dtype=torch.float16), freqs.float().half()).double()
    elif variant == "no_minus":
        angles = torch.outer(positions.float(), base ** (features.float() / head_dim)).double()
    else:
        angles = torch.outer(positions, freqs)
    cos, sin = angles.cos(), angles.sin()
    return (sin, cos) if variant == "swapped" else (cos, sin)


ROPE_TABLE_MISTAKES = variants("rope", {
    "your frequencies use the exponent i / head_dim, i being the pair index: it is 2i / head_dim "
    "(features 2i and 2i+1 share pair i's frequency), theta_i = base**(-2i / head_dim)": "pair_index",
    "your frequencies are base**(+2i / head_dim): the exponent is negative, so that pair 0 turns fastest "
    "(1 radian per position) and every later pair slower": "no_minus",
    "your exponent is off by one pair, base**(-2(i-1) / head_dim): pair 0's frequency is base**0 = 1": "off_by_one",
    "your positions start at 1 instead of 0: row p of the tables is position p, so row 0 is cos 1, sin 0":
        "from_one",
    "you returned (sin, cos): the contract's order is (cos, sin)": "swapped",
    "your angles are computed in float16, whose rounding of position * frequency reaches a radian at a few "
    "thousand positions: compute positions and frequencies in float32 (or float64)": "float16",
    "your frequencies ignore the base argument and always use 10000": "base_ignored",
    "your exponent is twice too large, base**(-4i / head_dim) (2i / (head_dim // 2), or the 2 of 2i counted "
    "twice): it is base**(-2i / head_dim), i counting the pairs from 0": "exponent_doubled",
})
ROPE_TABLE_SHAPE_MISTAKES = (
    mistake("rope", "tables_repeated_wide",
            "your tables are head_dim wide, each frequency repeated (as Hugging Face's cat((freqs, freqs)) is): "
            "this kit's tables hold one column per pair, head_dim // 2",
            lambda max_len, head_dim: torch.Size((max_len, head_dim))),
    mistake("rope", "tables_transposed", "your tables are transposed, (head_dim // 2, max_len): one row per position",
            lambda max_len, head_dim: torch.Size((head_dim // 2, max_len))),
)
ONE_COMPLEX_TABLE = mistake("rope", "one_complex_table",
                            "you returned one complex table (torch.polar, as Meta's precompute_freqs_cis does): return "
                            "its real and imaginary parts, cos and sin, as two float32 tables",
                            lambda result: result if isinstance(result, Tensor) and result.is_complex() else None)
FLOAT64_TABLE = mistake("rope", "float64_table",
                        "your table is float64 (math or float64 arithmetic left unconverted): return float32 tables, "
                        ".to(torch.float32)", lambda table: table.double() if table.dtype == torch.float64 else None)
ROPE_EXPONENT = mistake(
    "rope", "exponent_offsets",
    "your frequencies are base**(-{numerator} / {denominator}): they are base**(-2i / head_dim), i counting "
    "the pairs from 0, so pair 0 turns by 1 radian a position", dict())


# A family: the exponent 2i / head_dim rounded down to a whole number (an integer division, or an int of the
# quotient), which collapses the frequencies: 0 for every pair (all 1, the angle is the position itself), or, with
# the minus inside the floor, -1 for every pair after the first.
ROPE_EXPONENT_FLOORED = mistake(
    "rope", "exponent_floored",
    "your exponent is {exponent}, an integer division (//, or an int() or .long() of the quotient) that rounds "
    "down to a whole number, so your frequencies collapse to {freqs}: the exponent is -2i / head_dim with true "
    "division (/) in floating point, a different frequency for each pair, base**(-2i / head_dim)", dict())
FLOORED_EXPONENTS = {("2i // head_dim", "[1, 1, 1, ...]"): lambda i, base: torch.ones_like(i),
                     ("-2i // head_dim", "[1, 1/base, 1/base, ...]"): lambda i, base: torch.where(i == 0, 1.0, 1 / base)}


def _floored_tables(max_len: int, head_dim: int, base: float, freqs: Callable[[Tensor, float], Tensor]
                    ) -> tuple[Tensor, Tensor]:
    angles = torch.outer(torch.arange(max_len, dtype=torch.float64),
                         freqs(torch.arange(head_dim // 2, dtype=torch.float64), base))
    return angles.cos(), angles.sin()


def rope_table_mistakes(max_len: int, head_dim: int, base: float = 10000.0) -> Mistakes:
    """For the pair (cos, sin) of rope_angles; see them one at a time with `mapped`. Also the exponent off by
    EXPONENT_OFFSETS (off_by_one is (-2, 0)), and rounded down to a whole number (FLOORED_EXPONENTS)."""
    named = simulated(ROPE_TABLE_MISTAKES, lambda variant: rope_tables(max_len, head_dim, base, variant=variant))
    family = {text: (lambda k=k: rope_tables(max_len, head_dim, base, exponent_offsets=k))
              for text, k in exponent_texts(ROPE_EXPONENT, "head_dim", (-2, 0)).items()}
    family.update({ROPE_EXPONENT_FLOORED.text(exponent=exponent, freqs=freqs):
                   (lambda f=f: _floored_tables(max_len, head_dim, base, f))
                   for (exponent, freqs), f in FLOORED_EXPONENTS.items()})
    return {**named, **family}


def rope_table_shape_mistakes(max_len: int, head_dim: int) -> Mistakes:
    return bind(ROPE_TABLE_SHAPE_MISTAKES, max_len, head_dim)


def rope_table_pair_mistakes(result: Any) -> Mistakes:
    """For what rope_angles returned when it is not a pair of tables."""
    return bind([ONE_COMPLEX_TABLE], result)


def rope_table_dtype_mistakes(table: Tensor) -> Mistakes:
    return bind([FLOAT64_TABLE], table)


def rope_rotated(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None, *, variant: str = "") -> Tensor:
    """apply_rope(x, cos, sin, positions) in float64, with the mistake `variant` switched on."""
    x = x.double()
    length, d_head = x.shape[-2:]
    if variant == "unchanged":
        return x
    if positions is None or variant == "ignores_positions":
        positions = torch.arange(length) + (1 if variant == "default_from_one" and positions is None else 0)
    elif variant == "wrapped":
        positions = positions % cos.shape[0]
    c, s = cos.double()[positions], sin.double()[positions]
    if variant == "swapped_tables":
        c, s = s, c
    elif variant == "minus_angle":
        s = -s
    if variant == "rotate_half":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2:]
        return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)
    if variant == "halves_in":
        x1, x2 = x[..., : d_head // 2], x[..., d_head // 2:]
    elif variant == "pair_read_swapped":
        x1, x2 = x[..., 1::2], x[..., 0::2]
    else:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    if variant == "tables_repeated":
        rotated = torch.stack((-x2, x1), dim=-1).flatten(-2)
        return x * torch.cat((c, c), dim=-1) + rotated * torch.cat((s, s), dim=-1)
    first = x1 * c - x2 * s
    second = (first if variant == "even_rotated_first" else x1) * s + x2 * c
    if variant == "halves_out":
        return torch.cat((first, second), dim=-1)
    if variant == "pair_written_swapped":
        return torch.stack((second, first), dim=-1).flatten(-2)
    return torch.stack((first, second), dim=-1).flatten(-2)


ROPE_MISTAKES = variants("rope", {
    "your apply_rope returns x unchanged: every row but those at position 0 must be rotated": "unchanged",
    "your pairs are (i, i + Dh/2), the \"rotate_half\" layout of Hugging Face and GPT-NeoX: this kit pairs "
    "adjacent features (2i, 2i+1), as Meta's LLaMA and the RoFormer paper do (x[..., 0::2] with x[..., 1::2])":
        "rotate_half",
    "you rotate adjacent pairs but write the results back as two halves (torch.cat): put each pair's two "
    "features back side by side, at 2i and 2i+1 (stack on a new last dimension, then flatten)": "halves_out",
    "you read the pairs as the two halves (x[..., :Dh // 2] with x[..., Dh // 2:]) but write them back side by "
    "side: this kit's pairs are adjacent features (2i, 2i+1) both ways, x[..., 0::2] with x[..., 1::2]": "halves_in",
    "your rotation turns the wrong way (by minus the angle): out[2i] = x[2i] * cos - x[2i+1] * sin and "
    "out[2i+1] = x[2i] * sin + x[2i+1] * cos": "minus_angle",
    "you swapped the cos and sin tables: c comes from cos, s from sin": "swapped_tables",
    "your apply_rope ignores `positions` and always uses rows 0 .. T-1 of the tables: row t of x sits at "
    "positions[t] (after a cache, that is not t)": "ignores_positions",
    "your default positions start at 1: without `positions`, row t of x sits at position t, from 0":
        "default_from_one",
    "your tables are repeated as cat((cos, cos)) for adjacent pairs (the \"rotate_every_two\" trick with "
    "Hugging Face's tables): features 2i and 2i+1 must both use pair i's angle (repeat_interleave), not "
    "columns 2i and 2i+1 of the repeated table": "tables_repeated",
    "your second formula uses the already rotated even features (x[..., 0::2] was overwritten, or is a view "
    "of what you wrote): compute both from the original pair": "even_rotated_first",
    "you read each pair the other way round, (x[2i+1], x[2i]): the pair's first feature is the even one, "
    "x1 = x[..., 0::2], x2 = x[..., 1::2]": "pair_read_swapped",
    "you write each rotated pair back the other way round, the second result at 2i: out[2i] = x[2i] * cos - "
    "x[2i+1] * sin and out[2i+1] = x[2i] * sin + x[2i+1] * cos (stack((first, second), dim=-1))":
        "pair_written_swapped",
})
ROPE_IN_FLOAT32 = mistake("rope", "computed_in_float32",
                          "your apply_rope computes in float32 (x.float(), or complex64 numbers) and never casts back: "
                          "a float64 x must come back float64 (.type_as(x), as Meta's code ends)",
                          lambda x: torch.float32 if x.dtype == torch.float64 else None)
NEGATIVE_POSITIONS_WRAP = mistake(
    "rope", "negative_positions_wrap",
    "your apply_rope accepts negative positions: indexing the tables with -1 quietly reads their last row "
    "(Python indexing wraps around); check positions.min() >= 0 too",
    lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions, variant="wrapped")
    if bool((positions < 0).any()) else None)
ROPE_NO_GRAPH = "no autograd graph"
ROPE_WITHOUT_GRAPH = mistake("rope", "no_graph",
                             "your apply_rope's output is not computed from x with autograd (torch.no_grad(), "
                             "torch.inference_mode(), .detach(), or a new tensor): nothing before it (the projections "
                             "of q and k) would ever learn", lambda: ROPE_NO_GRAPH)
ROPE_IN_PLACE_MISTAKES = (
    mistake("rope", "rotated_in_place",
            "apply_rope wrote the rotation into the caller's x in place: build new tensors (torch.stack, torch.cat) "
            "and return them", lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions).to(x.dtype)),
    mistake("rope", "overwritten_in_place",
            "apply_rope overwrote the caller's x in place (x[..., 0::2] = ...), and used the overwritten even "
            "features for the odd ones",
            lambda x, cos, sin, positions: rope_rotated(x, cos, sin, positions, variant="even_rotated_first")),
)


# A family: the signs of the rotation's four terms slipped (minus_angle is the named member).
ROPE_SIGNS = mistake("rope", "signs",
                     "your rotation is out[2i] = {first} and out[2i+1] = {second}: it is out[2i] = x[2i] * cos - "
                     "x[2i+1] * sin and out[2i+1] = x[2i] * sin + x[2i+1] * cos", dict())
SIGN_SLIPS = [(a, b, d) for a in (-1, 1) for b in (-1, 1) for d in (-1, 1) if (a, b, d) not in ((-1, 1, 1), (1, -1, 1))]


def _signed(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None, signs: tuple[int, int, int]) -> Tensor:
    x = x.double()
    positions = torch.arange(x.shape[-2]) if positions is None else positions
    c, s = cos.double()[positions], sin.double()[positions]
    x1, x2 = x[..., 0::2], x[..., 1::2]
    a, b, d = signs
    return torch.stack((x1 * c + a * x2 * s, b * x1 * s + d * x2 * c), dim=-1).flatten(-2)


def _sign_text(signs: tuple[int, int, int]) -> str:
    a, b, d = signs
    first = f"x[2i] * cos {'+' if a > 0 else '-'} x[2i+1] * sin"
    second = f"{'' if b > 0 else '-'}x[2i] * sin {'+' if d > 0 else '-'} x[2i+1] * cos"
    return ROPE_SIGNS.text(first=first, second=second)


def rope_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None) -> Mistakes:
    """For apply_rope(x, cos, sin, positions); also the terms' signs slipped (SIGN_SLIPS)."""
    family = {_sign_text(k): (lambda k=k: _signed(x, cos, sin, positions, k)) for k in SIGN_SLIPS}
    return besides(simulated(ROPE_MISTAKES, lambda variant: rope_rotated(x, cos, sin, positions, variant=variant)),
                   family)


ROPE_ROWS_CACHED = mistake(
    "rope", "rows_cached_by_length",
    "your apply_rope keeps the rows it looked up on an earlier call with the same sequence length and uses them "
    "again (a cache keyed by the length only): a later call at other positions is rotated by the earlier "
    "positions' angles; look up the rows of each call's own positions",
    lambda x, cos, sin, earlier: rope_rotated(x, cos, sin, earlier))


def rope_stale_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor, earlier: Tensor) -> Mistakes:
    """For apply_rope(x, cos, sin, positions) called again with the same tables, after a call of the same length at
    the positions `earlier`."""
    stale = {} if torch.equal(earlier, positions) else bind([ROPE_ROWS_CACHED], x, cos, sin, earlier)
    return {**rope_mistakes(x, cos, sin, positions), **stale}


def rope_dtype_mistakes(x: Tensor) -> Mistakes:
    """For the dtype of apply_rope's result."""
    return bind([ROPE_IN_FLOAT32], x)


def rope_wrapped_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor) -> Mistakes:
    """For what apply_rope returned instead of rejecting a negative position."""
    return bind([NEGATIVE_POSITIONS_WRAP], x, cos, sin, positions)


def rope_grad_mistakes() -> Mistakes:
    """For what went wrong when backpropagating through apply_rope (ROPE_NO_GRAPH: backward found nothing)."""
    return bind([ROPE_WITHOUT_GRAPH])


def rope_in_place_mistakes(x: Tensor, cos: Tensor, sin: Tensor, positions: Tensor | None) -> Mistakes:
    """For x as it is after apply_rope(x, cos, sin, positions)."""
    return bind(ROPE_IN_PLACE_MISTAKES, x, cos, sin, positions)
