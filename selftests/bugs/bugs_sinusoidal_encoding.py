from . import Bug

BUGS = [
    Bug("sinusoidal_encoding", "sin_cos_swapped", "positional.py",
        "pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "pe[:, 0::2] = torch.cos(position * inv_freq)\n    pe[:, 1::2] = torch.sin(position * inv_freq)",
        "puts the cosines in the even columns and the sines in the odd ones",
        diagnosis=("sinusoidal_encoding:sin_cos_swapped", "sinusoidal_encoding:odd_sines")),
    Bug("sinusoidal_encoding", "exponent_i_over_d", "positional.py",
        "torch.arange(0, d_model, 2, dtype=torch.float32)",
        "torch.arange(0, d_model // 2, dtype=torch.float32)",
        "uses the pair index i instead of 2i in the exponent 2i/d_model",
        diagnosis=("sinusoidal_encoding:exponent_i",)),
    Bug("sinusoidal_encoding", "base_1000", "positional.py",
        "math.log(10000.0)",
        "math.log(1000.0)",
        "uses 1000 instead of 10000 as the base of the wavelengths",
        diagnosis=("sinusoidal_encoding:base_1000",)),
    Bug("sinusoidal_encoding", "positions_from_one", "positional.py",
        "torch.arange(max_len, dtype=torch.float32)",
        "torch.arange(1, max_len + 1, dtype=torch.float32)",
        "numbers the positions from 1 instead of 0",
        diagnosis=("sinusoidal_encoding:positions_from_1",)),
    Bug("sinusoidal_encoding", "no_odd_d_model_check", "positional.py",
        '    if d_model % 2 != 0:\n        raise ValueError(f"d_model must be even, got {d_model}")\n',
        "",
        "forgets to reject an odd d_model, which cannot be split into (sin, cos) pairs",
        named_by="expected a ValueError"),
    Bug("sinusoidal_encoding", "no_positivity_check", "positional.py",
        '    if max_len <= 0 or d_model <= 0:\n        raise ValueError(f"max_len and d_model must be positive, got {max_len} and {d_model}")\n',
        "",
        "forgets to reject an empty or negative table size",
        named_by="expected a ValueError"),
    Bug("sinusoidal_encoding", "cosines_also_sines", "positional.py",
        "pe[:, 1::2] = torch.cos(position * inv_freq)",
        "pe[:, 1::2] = torch.sin(position * inv_freq)",
        "copies the sine line for the odd columns and forgets to change it to a cosine",
        diagnosis=("sinusoidal_encoding:odd_sines",)),
    Bug("sinusoidal_encoding", "position_times_frequency_forgotten", "positional.py",
        "pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "pe[:, 0::2] = torch.sin(position + inv_freq)\n    pe[:, 1::2] = torch.cos(position + inv_freq)",
        "adds the frequency to the position instead of multiplying them",
        diagnosis=("sinusoidal_encoding:angle_sum",)),
    Bug("sinusoidal_encoding", "position_left_out", "positional.py",
        "pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "pe[:, 0::2] = torch.sin(inv_freq)\n    pe[:, 1::2] = torch.cos(inv_freq)",
        "leaves the position out of the angle, so every row gets the same encoding",
        diagnosis=("sinusoidal_encoding:angle_without_position",)),
    Bug("sinusoidal_encoding", "batch_dimension_added", "positional.py",
        "    return pe\n",
        "    return pe.unsqueeze(0)\n",
        "returns the table with a leading batch dimension, (1, max_len, d_model), as a registered buffer often has",
        diagnosis=("sinusoidal_encoding:batch_dimension",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("sinusoidal_encoding", "exponent_over_d_minus_1", "positional.py", "(-math.log(10000.0) / d_model)",
        "(-math.log(10000.0) / (d_model - 1))",
        "divides the exponent by d_model - 1",
        diagnosis=("sinusoidal_encoding:exponent_over_d_minus_1",)),
]

BUGS += [
    Bug("sinusoidal_encoding", "base_with_an_extra_zero", "positional.py", "(-math.log(10000.0) / d_model)",
        "(-math.log(100000.0) / d_model)",
        "writes the base with an extra zero, 100000",
        diagnosis=("sinusoidal_encoding:other_base",)),
]

# A member of the fitted exponent family (mistakes.TABLE_EXPONENT) that no single entry names.
BUGS += [
    Bug("sinusoidal_encoding", "exponent_over_d_plus_1", "positional.py", "(-math.log(10000.0) / d_model)",
        "(-math.log(10000.0) / (d_model + 1))",
        "divides the exponent by d_model + 1",
        diagnosis=("sinusoidal_encoding:exponent_offsets",)),
]

# The sines and cosines in two halves of the columns instead of interleaved (tensor2tensor's layout).
BUGS += [
    Bug("sinusoidal_encoding", "sin_cos_halves", "positional.py",
        "    pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "    pe[:, : d_model // 2] = torch.sin(position * inv_freq)\n"
        "    pe[:, d_model // 2 :] = torch.cos(position * inv_freq)",
        "sines in the first half of the columns and cosines in the second (tensor2tensor layout), not interleaved",
        diagnosis=("sinusoidal_encoding:sin_cos_halves",)),
    Bug("sinusoidal_encoding", "cat_sin_cos", "positional.py",
        "    pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "    pe = torch.cat([torch.sin(position * inv_freq), torch.cos(position * inv_freq)], dim=-1)",
        "concatenates the sine and cosine tables along the features",
        diagnosis=("sinusoidal_encoding:sin_cos_halves",)),
    Bug("sinusoidal_encoding", "cat_cos_sin", "positional.py",
        "    pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "    pe = torch.cat([torch.cos(position * inv_freq), torch.sin(position * inv_freq)], dim=-1)",
        "concatenates the cosines first, then the sines",
        diagnosis=("sinusoidal_encoding:cos_sin_halves",)),
    Bug("sinusoidal_encoding", "stack_then_view_halves", "positional.py",
        "    pe[:, 0::2] = torch.sin(position * inv_freq)\n    pe[:, 1::2] = torch.cos(position * inv_freq)",
        "    pe = torch.stack([torch.sin(position * inv_freq), torch.cos(position * inv_freq)], dim=1)"
        ".view(max_len, d_model)",
        "stacks sin and cos on dim 1, so flattening puts all sines before all cosines",
        diagnosis=("sinusoidal_encoding:sin_cos_halves",)),
]

# The frequencies' formula written wrong in exp/log form (a lost minus sign is not here: its angles, thousands of
# radians, differ in float32 from any model's).
BUGS += [
    Bug("sinusoidal_encoding", "exp_without_log", "positional.py",
        "(-math.log(10000.0) / d_model)", "(-10000.0 / d_model)",
        "writes exp(-10000 * 2i / d) and forgets the log of the base",
        diagnosis=("sinusoidal_encoding:exp_without_log",)),
    Bug("sinusoidal_encoding", "exponent_sign_dropped", "positional.py",
        "(-math.log(10000.0) / d_model)", "(math.log(10000.0) / d_model)",
        "drops the minus sign of the exponent, so the frequencies grow instead of shrinking",
        diagnosis=("sinusoidal_encoding:positive_exponent",)),
    Bug("sinusoidal_encoding", "times_div_term", "positional.py",
        "torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))",
        "10000.0 ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)",
        "computes div_term = 10000^(2i/d) and multiplies the positions by it where they are divided by it",
        diagnosis=("sinusoidal_encoding:positive_exponent",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('sinusoidal_encoding', 'odd_indices', 'positional.py',
        'torch.arange(0, d_model, 2, dtype=torch.float32)',
        'torch.arange(1, d_model, 2, dtype=torch.float32)',
        'takes the exponents from arange(1, d_model, 2), the odd columns',
        diagnosis=("sinusoidal_encoding:exponent_offsets",)),
    Bug('sinusoidal_encoding', 'log10', 'positional.py',
        'math.log(10000.0)',
        'math.log10(10000.0)',
        'uses math.log10 where the natural log is meant',
        diagnosis=("sinusoidal_encoding:other_base",)),
    Bug('sinusoidal_encoding', 'over_half_d', 'positional.py',
        '(-math.log(10000.0) / d_model)',
        '(-math.log(10000.0) / (d_model // 2))',
        'divides the exponent by d_model // 2 instead of d_model',
        diagnosis=("sinusoidal_encoding:exponent_times",)),
    # Held-out set 14's integer_division_exponent: told its base was 1.
    Bug("sinusoidal_encoding", "exponent_floor_divided", "positional.py",
        "inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))",
        "inv_freq = 1.0 / (10000 ** (torch.arange(0, d_model, 2) // d_model))",
        "floor-divides the integer exponent 2i // d_model, which is 0",
        diagnosis=("sinusoidal_encoding:exponent_floored",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): the table cached under max_len alone.
    Bug("sinusoidal_encoding", "table_cached_by_max_len", "positional.py",
        "    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)\n",
        "    tables = sinusoidal_positional_encoding.__dict__.setdefault(\"tables\", {})  # one table per length\n"
        "    if max_len in tables:\n"
        "        return tables[max_len].clone()\n"
        "    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)\n",
        "caches the tables under max_len only, so a later call with the same max_len and another d_model gets the "
        "first table back",
        diagnosis=("sinusoidal_encoding:table_cached_by_max_len",),
        also=(("positional.py", "    return pe\n", "    tables[max_len] = pe\n    return pe.clone()\n"),)),
]
