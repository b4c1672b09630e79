from . import Bug

INV_FREQ = "inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)"
ANGLES = "angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv_freq)"
TABLE_ROWS = "c, s = cos[positions].to(x.dtype), sin[positions].to(x.dtype)"
PAIRS = "x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each"
ROTATE = "return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)"

BUGS = [
    # rope_angles
    Bug("rope", "exponent_pair_index", "rope.py", INV_FREQ,
        "inv_freq = base ** (-torch.arange(0, head_dim // 2, dtype=torch.float32) / head_dim)",
        "divides the pair index i by head_dim, i / head_dim instead of 2i / head_dim",
        diagnosis=("rope:pair_index",)),
    Bug("rope", "exponent_without_minus", "rope.py", INV_FREQ,
        "inv_freq = base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
        "forgets the minus sign of the exponent, so the frequencies grow with i",
        diagnosis=("rope:no_minus",)),
    Bug("rope", "exponent_off_by_one", "rope.py", INV_FREQ,
        "inv_freq = base ** (-(torch.arange(0, head_dim, 2, dtype=torch.float32) - 2) / head_dim)",
        "counts the pairs from 1 in the exponent, base**(-2(i-1)/head_dim)",
        diagnosis=("rope:off_by_one",)),
    Bug("rope", "base_ignored", "rope.py", INV_FREQ,
        "inv_freq = 10000.0 ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)",
        "hard-codes 10000 and ignores the base argument",
        diagnosis=("rope:base_ignored",)),
    Bug("rope", "positions_from_one", "rope.py", ANGLES,
        "angles = torch.outer(torch.arange(1, max_len + 1, dtype=torch.float32), inv_freq)",
        "numbers the positions of the tables from 1",
        diagnosis=("rope:from_one",)),
    Bug("rope", "float16_angles", "rope.py", ANGLES,
        "angles = torch.outer(torch.arange(max_len, dtype=torch.float16), inv_freq.half()).float()",
        "computes the angles in float16, as the model's half precision would (GPT-NeoX's old tables)",
        diagnosis=("rope:float16",)),
    Bug("rope", "sin_cos_returned_swapped", "rope.py", "return angles.cos(), angles.sin()",
        "return angles.sin(), angles.cos()",
        "returns (sin, cos)",
        diagnosis=("rope:swapped",)),
    Bug("rope", "tables_head_dim_wide", "rope.py", "return angles.cos(), angles.sin()",
        "angles = torch.cat((angles, angles), dim=-1)\n    return angles.cos(), angles.sin()",
        "returns Hugging Face's head_dim-wide tables, cat((freqs, freqs))",
        diagnosis=("rope:tables_repeated_wide",)),
    Bug("rope", "complex_table", "rope.py", "return angles.cos(), angles.sin()",
        "return torch.polar(torch.ones_like(angles), angles)",
        "returns one complex table, as Meta's precompute_freqs_cis does",
        diagnosis=("rope:one_complex_table",)),
    # apply_rope
    Bug("rope", "rows_cached_by_length", "rope.py", TABLE_ROWS,
        "cached = getattr(cos, \"_rows\", None)  # the rows of the last length asked for, kept on the table\n"
        "    if cached is None or cached[0] != T:\n"
        "        cached = T, cos[positions].to(x.dtype), sin[positions].to(x.dtype)\n"
        "        cos._rows = cached\n"
        "    _, c, s = cached",
        "caches the tables' rows under the sequence length only (a public tracker's bug), so that a model's "
        "second call of the same length at other positions reuses stale angles",
        diagnosis=("rope:rows_cached_by_length",)),
    Bug("rope", "rotate_half_layout", "rope.py", f"    {PAIRS}\n    {ROTATE}",
        "    x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]\n"
        "    return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)",
        "pairs feature i with i + Dh/2 (Hugging Face's rotate_half) instead of adjacent features",
        diagnosis=("rope:rotate_half",)),
    Bug("rope", "halves_written_back", "rope.py", ROTATE,
        "return torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1)",
        "rotates adjacent pairs but writes the results back as two halves",
        diagnosis=("rope:halves_out",)),
    Bug("rope", "sign_of_sin", "rope.py", ROTATE,
        "return torch.stack((x1 * c + x2 * s, -x1 * s + x2 * c), dim=-1).flatten(-2)",
        "puts the minus sign on the other sin term, turning by minus the angle",
        diagnosis=("rope:minus_angle",)),
    Bug("rope", "tables_swapped", "rope.py", TABLE_ROWS,
        "c, s = sin[positions].to(x.dtype), cos[positions].to(x.dtype)",
        "takes c from the sin table and s from the cos table",
        diagnosis=("rope:swapped_tables",)),
    Bug("rope", "positions_ignored", "rope.py", TABLE_ROWS,
        "c, s = cos[:T].to(x.dtype), sin[:T].to(x.dtype)",
        "slices the first T rows of the tables whatever the positions (breaks decoding after a cache)",
        diagnosis=("rope:ignores_positions",)),
    Bug("rope", "default_positions_from_one", "rope.py", "positions = torch.arange(T, device=x.device)",
        "positions = torch.arange(1, T + 1, device=x.device)",
        "numbers the default positions from 1",
        diagnosis=("rope:default_from_one",)),
    Bug("rope", "repeated_tables_every_two", "rope.py", f"    {PAIRS}\n    {ROTATE}",
        "    c, s = torch.cat((c, c), dim=-1), torch.cat((s, s), dim=-1)\n"
        "    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), dim=-1).flatten(-2)\n"
        "    return x * c + rotated * s",
        "rotates adjacent pairs (rotate_every_two) with tables repeated by cat, so a pair's two features get "
        "different angles",
        diagnosis=("rope:tables_repeated",)),
    Bug("rope", "float32_result", "rope.py", f"{TABLE_ROWS}  # (T, Dh/2)\n    {PAIRS}",
        "c, s = cos[positions], sin[positions]\n"
        "    x1, x2 = x.float()[..., 0::2], x.float()[..., 1::2]",
        "computes in float32, as Meta's code does, but never casts back to x's dtype",
        diagnosis=("rope:computed_in_float32",)),
    Bug("rope", "rotated_in_place", "rope.py", f"    {PAIRS}\n    {ROTATE}",
        f"    {PAIRS}\n"
        "    x[..., 0::2] = x1 * c - x2 * s\n"
        "    x[..., 1::2] = x1 * s + x2 * c\n"
        "    return x",
        "writes the rotation into the caller's x, whose even features it then reads back already rotated",
        diagnosis=("rope:overwritten_in_place", "rope:even_rotated_first")),
    Bug("rope", "negative_positions_wrap", "rope.py",
        "positions.numel() and (positions.min() < 0 or positions.max() >= cos.size(0))",
        "positions.numel() and positions.max() >= cos.size(0)",
        "checks only the upper end of the positions, so -1 reads the tables' last row",
        diagnosis=("rope:negative_positions_wrap",)),
    Bug("rope", "no_grad", "rope.py", "def apply_rope(",
        "@torch.no_grad()\ndef apply_rope(",
        "decorates apply_rope with torch.no_grad(), as Hugging Face's rotary-embedding module is",
        diagnosis=("rope:no_graph",)),
]

# Members of the fitted exponent family (mistakes.ROPE_EXPONENT) that no single entry names.
BUGS += [
    Bug("rope", "exponent_over_head_dim_plus_2", "rope.py", "/ head_dim)  # (Dh/2,)", "/ (head_dim + 2))  # (Dh/2,)",
        "divides the exponent by head_dim + 2",
        diagnosis=("rope:exponent_offsets",)),
    Bug("rope", "odd_features_exponent", "rope.py", "torch.arange(0, head_dim, 2, dtype=torch.float32)",
        "torch.arange(1, head_dim + 1, 2, dtype=torch.float32)",
        "counts the exponent's features from 1, (2i + 1) / head_dim",
        diagnosis=("rope:exponent_offsets",)),
]

# The rotation's signs slipped, and the exponent doubled (mistakes.ROPE_SIGNS, the exponent_doubled variant).
BUGS += [
    Bug("rope", "second_cos_term_negated", "rope.py",
        "return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)",
        "return torch.stack((x1 * c - x2 * s, x1 * s - x2 * c), dim=-1).flatten(-2)",
        "writes - x2 * cos in the second formula", diagnosis=("rope:signs",)),
    Bug("rope", "both_sine_terms_plus", "rope.py",
        "return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)",
        "return torch.stack((x1 * c + x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)",
        "adds both sine terms", diagnosis=("rope:signs",)),
    Bug("rope", "exponent_over_half_head_dim", "rope.py",
        "inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)  # (Dh/2,)",
        "inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / (head_dim // 2))  # (Dh/2,)",
        "divides 2i by head_dim // 2", diagnosis=("rope:exponent_doubled",)),
]

# The exponent rounded down to a whole number (mistakes.ROPE_EXPONENT_FLOORED): held-out set 10's integer_division,
# and siblings (the floor of the negative quotient; an int of the quotient).
BUGS += [
    Bug("rope", "exponent_integer_division", "rope.py", INV_FREQ,
        "inv_freq = base ** (-(torch.arange(0, head_dim, 2) // head_dim)).float()",
        "divides the integer feature indices with //, so every exponent is 0",
        diagnosis=("rope:exponent_floored",)),
    Bug("rope", "exponent_floor_of_negative", "rope.py", INV_FREQ,
        "inv_freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) // head_dim)",
        "writes // for /, which floors -2i / head_dim to -1 for every pair after the first",
        diagnosis=("rope:exponent_floored",)),
    Bug("rope", "exponent_cast_to_int", "rope.py", INV_FREQ,
        "inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2) / head_dim).long()",
        "casts the quotient 2i / head_dim to an integer, so every exponent is 0",
        diagnosis=("rope:exponent_floored",)),
    Bug("rope", "halves_read_pairs_written", "rope.py", PAIRS,
        "x1, x2 = x[..., : Dh // 2], x[..., Dh // 2:]",
        "reads the pairs as halves (i, i + Dh/2) but writes them back interleaved",
        diagnosis=("rope:halves_in",)),
    Bug("rope", "pair_read_the_other_way", "rope.py", "x1, x2 = x[..., 0::2], x[..., 1::2]  # (..., T, Dh/2) each",
        "x1, x2 = x[..., 1::2], x[..., 0::2]  # (..., T, Dh/2) each",
        "takes the odd feature of each pair as its first one",
        diagnosis=("rope:pair_read_swapped",)),
    Bug("rope", "pair_written_the_other_way", "rope.py",
        "return torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)",
        "return torch.stack((x1 * s + x2 * c, x1 * c - x2 * s), dim=-1).flatten(-2)",
        "writes the pair's second result to the even feature",
        diagnosis=("rope:pair_written_swapped",)),
]
