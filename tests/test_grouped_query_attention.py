"""grouped_query_attention: `repeat_kv` and `GroupedQueryAttention` in gqa.py.

Expected values come from PyTorch's own `F.scaled_dot_product_attention` (with `enable_gqa=True`
where the installed torch has it, else on keys and values repeated by `torch.repeat_interleave`)
and from `nn.MultiheadAttention` carrying the grouped weights repeated per head, in float64, with
injected weights. The checks build RoPE tables here and rotate grader-side by complex
multiplication; inside the student's forward, `apply_rope`, `split_heads`,
`scaled_dot_product_attention`, `causal_mask` and `KVCache` are the grader's trusted stand-ins
(this component owns none of them), so a bug there costs its own component only.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, check_tensor, explained, fail
from checklib.masks import self_attention_mask
from checklib.mistakes import grouped_query_attention as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error, naming_errors
from checklib.weights import gqa_state, randn, torch_mha
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

GQA = adapters.GroupedQueryAttention
REPEAT_KV = adapters.repeat_kv
DTYPES = [torch.float32, torch.float64]

# (B, T, D, H, Hkv): multi-query (Hkv = 1), divisors with 2 and 3 query heads per group, multi-head
# (Hkv = H), T = 1; d_k = 4 everywhere, so RoPE applies.
SHAPES = [(2, 5, 16, 4, 1), (2, 5, 16, 4, 2), (2, 6, 24, 6, 2), (1, 4, 8, 2, 2), (3, 1, 16, 4, 2), (2, 4, 32, 8, 4)]


def shape_id(shape) -> str:
    return "B{}-T{}-D{}-H{}-kv{}".format(*shape)


WHERE = ("project x with w_q (n_heads heads) and w_k, w_v (n_kv_heads heads), split each as split_heads does, "
         "let query head h attend with key/value head h // (n_heads // n_kv_heads) (repeat_kv), merge the "
         "heads, apply out_proj")
CACHED = ("with a cache, rotate the new queries and keys at positions len(cache) .. len(cache) + T - 1 "
          "before cache.update, let the new queries attend to everything update returns with "
          "causal_mask(T_new, T_total), and repeat the keys and values only for the attention")


def heads(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(B, T, n * Dh) -> (B, n, T, Dh), head h holding features h*Dh .. (h+1)*Dh - 1."""
    batch, length, width = x.shape
    return x.reshape(batch, length, n_heads, width // n_heads).transpose(1, 2)


def rope_tables(max_len: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """The contract's rope_angles: float32 (max_len, head_dim // 2) cos and sin."""
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * freqs
    return torch.cos(angles), torch.sin(angles)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """RoPE on adjacent pairs as complex multiplication: pair i of row t times exp(i * angle[positions[t], i])."""
    pairs = torch.view_as_complex(x.double().reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(pairs * torch.complex(cos[positions].double(), sin[positions].double())).reshape(x.shape)


def grouped_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """PyTorch's attention with n_heads query heads over fewer key/value heads."""
    try:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    except TypeError:  # a torch before enable_gqa
        n_rep = q.shape[1] // k.shape[1]
        return F.scaled_dot_product_attention(q, k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1),
                                              attn_mask=mask)


def projected(state, x, name: str, n: int) -> torch.Tensor:
    weight, bias = state[f"{name}.weight"].double(), state.get(f"{name}.bias")
    return heads(F.linear(x.double(), weight, None if bias is None else bias.double()), n)


def reference(state, x, n_heads, n_kv_heads, mask=None, rope=None) -> torch.Tensor:
    """The contract's forward without a cache, in float64: rope at positions 0 .. T-1 when given."""
    q, k, v = projected(state, x, "w_q", n_heads), projected(state, x, "w_k", n_kv_heads), projected(state, x, "w_v", n_kv_heads)
    if rope is not None:
        positions = torch.arange(x.shape[1])
        q, k = rotate(q, *rope, positions), rotate(k, *rope, positions)
    out = grouped_sdpa(q, k, v, mask).transpose(1, 2).reshape(x.shape).double()
    bias = state.get("out_proj.bias")
    return F.linear(out, state["out_proj.weight"].double(), None if bias is None else bias.double()).to(x.dtype)


def new_gqa(impl, d_model, n_heads, n_kv_heads, state):
    bias = "w_q.bias" in state
    m = GQA(impl, d_model, n_heads, n_kv_heads, bias=bias)
    if state["w_q.weight"].dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    return m


def naming_heads(what: str, n_heads: int, n_kv_heads: int, d_k: int):
    """Around a forward: an error that keys or values with the wrong number of heads raise, named where the sizes
    it reveals point to one mistake (mistakes.gqa_heads_error)."""
    return naming_errors(what, lambda exc: mistakes.gqa_heads_error(exc.message, n_heads, n_kv_heads, d_k))


def call_text(d_model, n_heads, n_kv_heads, x, mask=None, rope=False) -> str:
    m = "None" if mask is None else Phrase('bool {tuple_mask_shape}', tuple_mask_shape=tuple(mask.shape))
    return (f"GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads})(x {tuple(x.shape)}, mask={m}"
            + (", rope=(cos, sin))" if rope else ")"))


# --- __init__ ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("d_model, n_heads, n_kv_heads, bias", [(16, 4, 2, False), (16, 4, 1, True), (24, 6, 3, True),
                                                                 (8, 2, 2, False)],
                         ids=lambda v: str(v))
def test_state_dict_layout(impl, d_model, n_heads, n_kv_heads, bias):
    got = GQA(impl, d_model, n_heads, n_kv_heads, bias=bias).state_dict()
    d_kv = n_kv_heads * (d_model // n_heads)
    shapes = {"w_q.weight": (d_model, d_model), "w_k.weight": (d_kv, d_model), "w_v.weight": (d_kv, d_model),
              "out_proj.weight": (d_model, d_model)}
    if bias:
        shapes.update({"w_q.bias": (d_model,), "w_k.bias": (d_kv,), "w_v.bias": (d_kv,), "out_proj.bias": (d_model,)})
    what = f"GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads}, bias={bias}).state_dict()"
    if set(got) != set(shapes):
        fail(what, Phrase("missing keys {sorted_set_shapes_set_got}, unexpected keys {sorted_set_got_set_shapes}",
                          sorted_set_shapes_set_got=sorted(set(shapes) - set(got)),
                          sorted_set_got_set_shapes=sorted(set(got) - set(shapes))),
             hint="four nn.Linear(..., bias=bias) named w_q, w_k, w_v, out_proj, and no other parameters",
             actual=set(got), mistakes=mistakes.gqa_key_mistakes(set(shapes), bias))
    for key, shape in shapes.items():
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape, dtype=torch.float32,
                     hint="w_q and out_proj are nn.Linear(d_model, d_model); w_k and w_v are "
                          "nn.Linear(d_model, n_kv_heads * d_k) (nn.Linear stores its weight as (out, in))",
                     mistakes=mistakes.gqa_shape_mistakes(d_model, n_heads, n_kv_heads, key))


def test_attributes(impl):
    m = GQA(impl, 24, 6, 2)
    for name, expected in (("d_model", 24), ("n_heads", 6), ("n_kv_heads", 2), ("d_k", 4)):
        got = m.attr(name)
        if not (type(got) is int and got == expected):
            fail(f"GroupedQueryAttention(24, 6, 2).{name}", Phrase("expected the int {expected}, got {got}",
                                                                   expected=expected, got=repr(got)),
                 hint="store d_model, n_heads, n_kv_heads and d_k = d_model // n_heads (an int: use //)")


@pytest.mark.parametrize("d_model, n_heads, n_kv_heads", [(10, 4, 2), (16, 4, 3), (16, 4, 0), (16, 4, -1), (16, 4, -2)],
                         ids=lambda v: str(v))
def test_rejects_bad_sizes(impl, d_model, n_heads, n_kv_heads):
    message = expect_value_error(lambda *args: GQA(impl, *args), d_model, n_heads, n_kv_heads,
                                 what=f"GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads})")
    assert message, ("the ValueError should say what is wrong: n_heads must divide d_model, and n_kv_heads "
                     "(at least 1) must divide n_heads")


# --- repeat_kv --------------------------------------------------------------------------------------


# n_rep = 1 (the identity) is left out: an echo of x would pass it without the work.
@pytest.mark.parametrize("shape, n_rep, dtype", [((2, 2, 5, 4), 3, torch.float32), ((1, 3, 4, 2), 2, torch.float64),
                                                 ((2, 1, 3, 4), 4, torch.float32), ((2, 4, 3, 6), 2, torch.float64),
                                                 ((3, 2, 1, 4), 2, torch.float64)],
                         ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_repeat_kv_matches_repeat_interleave(impl, gen, shape, n_rep, dtype):
    x = randn(*shape, gen=gen, dtype=dtype)
    expected = torch.repeat_interleave(x, n_rep, dim=1)
    got, after = REPEAT_KV(impl).call_returning_args(x, n_rep)
    assert_close(got, expected, what=Phrase("repeat_kv(x {tuple_shape}, {n_rep}) vs torch.repeat_interleave(x, "
                                            "{n_rep}, dim=1)", tuple_shape=tuple(shape), n_rep=n_rep),
                 hint="output head j is input head j // n_rep: each key/value head n_rep times in a row",
                 mistakes=mistakes.repeat_kv_mistakes(x, n_rep))
    assert_close(after[0], x, what="x after repeat_kv", hint="repeat_kv must not modify its input")


@pytest.mark.parametrize("n_rep", [0, -1])
def test_repeat_kv_rejects_bad_n_rep(impl, gen, n_rep):
    x = randn(2, 2, 3, 4, gen=gen)
    message = expect_value_error(REPEAT_KV(impl), x, n_rep, what=f"repeat_kv(x, {n_rep})")
    assert message, "the ValueError should say what is wrong (n_rep must be at least 1)"


# --- the forward, without a cache -------------------------------------------------------------------

FORWARD_CASES = [(s, kind, bias, DTYPES[i % 2]) for i, s in enumerate(SHAPES)
                 for kind, bias in ((("none", True), ("causal", False), ("2d", True), ("batch", False),
                                     ("heads", True), ("none", False)) * 2)[i:i + 2]]


@pytest.mark.parametrize("shape, mask_kind, bias, dtype", FORWARD_CASES,
                         ids=[f"{shape_id(s)}-{k}-{'bias' if b else 'nobias'}-{str(d)[6:]}" for s, k, b, d in FORWARD_CASES])
def test_matches_sdpa(impl, gen, shape, mask_kind, bias, dtype):
    batch, length, d_model, n_heads, n_kv_heads = shape
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen, dtype=dtype, bias=bias)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    mask = self_attention_mask(mask_kind, batch, n_heads, length, gen)
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    what = call_text(d_model, n_heads, n_kv_heads, x, mask)
    with naming_heads(what, n_heads, n_kv_heads, d_model // n_heads):
        out = m(x, mask)
    assert_close(out, reference(state, x, n_heads, n_kv_heads, mask),
                 what=Phrase("{what} vs F.scaled_dot_product_attention(..., enable_gqa=True) with the same weights",
                             what=what),
                 hint=WHERE, mistakes=mistakes.gqa_mistakes(state, x, n_heads, n_kv_heads, mask=mask))


@pytest.mark.parametrize("shape", [SHAPES[0], SHAPES[2], SHAPES[5]], ids=shape_id)
def test_equals_mha_with_shared_kv_weights(impl, gen, shape):
    """GQA is multi-head attention whose query heads of a group share one key/value projection."""
    batch, length, d_model, n_heads, n_kv_heads = shape
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen, bias=True)
    d_k, n_rep = d_model // n_heads, n_heads // n_kv_heads
    full = dict(state)
    for name in ("w_k", "w_v"):  # kv head g's rows, once for each of its n_rep query heads
        full[f"{name}.weight"] = state[f"{name}.weight"].reshape(n_kv_heads, d_k, d_model).repeat_interleave(
            n_rep, dim=0).reshape(d_model, d_model)
        full[f"{name}.bias"] = state[f"{name}.bias"].reshape(n_kv_heads, d_k).repeat_interleave(
            n_rep, dim=0).reshape(-1)
    ref = torch_mha({k: v.double() for k, v in full.items()}, d_model, n_heads)
    x = randn(batch, length, d_model, gen=gen)
    mask = torch.ones(length, length, dtype=torch.bool).tril()
    with torch.no_grad():
        expected = ref(x.double(), x.double(), x.double(), attn_mask=~mask, need_weights=False)[0].float()
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    with naming_heads(call_text(d_model, n_heads, n_kv_heads, x, mask), n_heads, n_kv_heads, d_k):
        out = m(x, mask)
    assert_close(out, expected,
                 what=Phrase("{call_text_d_model_n_heads_n_kv_heads_x_mask} vs nn.MultiheadAttention({d_model}, "
                             "{n_heads}) whose key/value weights repeat each group's for its {n_rep} query heads",
                             call_text_d_model_n_heads_n_kv_heads_x_mask=call_text(d_model, n_heads, n_kv_heads, x, mask),
                             d_model=d_model, n_heads=n_heads, n_rep=n_rep),
                 hint=WHERE, mistakes=mistakes.gqa_mistakes(state, x, n_heads, n_kv_heads, mask=mask))


ROPE_CASES = [(s, kind, DTYPES[i % 2]) for i, s in enumerate(SHAPES) for kind in (("causal", "none") * 4)[i:i + 1]]


@pytest.mark.parametrize("shape, mask_kind, dtype", ROPE_CASES,
                         ids=[f"{shape_id(s)}-{k}-{str(d)[6:]}" for s, k, d in ROPE_CASES])
def test_with_rope_matches_sdpa(impl, gen, shape, mask_kind, dtype):
    batch, length, d_model, n_heads, n_kv_heads = shape
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen, dtype=dtype)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    mask = self_attention_mask(mask_kind, batch, n_heads, length, gen)
    rope = rope_tables(16, d_model // n_heads, base=100.0)  # a small base turns even the last pair visibly
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    with naming_heads(call_text(d_model, n_heads, n_kv_heads, x, mask, rope=True), n_heads, n_kv_heads, d_model // n_heads):
        out = m(x, mask, rope=rope)
    assert_close(out, reference(state, x, n_heads, n_kv_heads, mask, rope),
                 what=Phrase("{call_text_d_model_n_heads_n_kv_heads_x_mask_rope_True} vs "
                             "F.scaled_dot_product_attention(..., enable_gqa=True) on queries and keys rotated at "
                             "0 .. T-1",
                             call_text_d_model_n_heads_n_kv_heads_x_mask_rope_True=call_text(d_model, n_heads, n_kv_heads, x, mask, rope=True)),
                 hint="with rope = (cos, sin), rotate the head-split queries and keys with apply_rope at positions "
                      "0 .. T-1 (without a cache) before the attention; the values are not rotated",
                 mistakes=mistakes.gqa_mistakes(state, x, n_heads, n_kv_heads, mask=mask, rope=rope))


# --- the forward with a cache -----------------------------------------------------------------------


def span(start: int, stop: int) -> str:
    return Phrase('position {start}', start=start) if stop == start + 1 else Phrase("positions {start} .. {stop_1}",
                                                                                    start=start, stop_1=stop - 1)

SCHEDULES = {"prompt3-then-1-then-2": [(0, 3), (3, 4), (4, 6)], "one-by-one": [(t, t + 1) for t in range(5)],
             "prompt1-then-4": [(0, 1), (1, 5)]}
DECODE_CASES = [((n_heads, n_kv_heads), schedule, rope, DTYPES[i % 2])
                for i, ((n_heads, n_kv_heads), schedule, rope) in enumerate([
                    ((4, 1), "prompt3-then-1-then-2", True), ((4, 2), "prompt3-then-1-then-2", True),
                    ((6, 3), "prompt3-then-1-then-2", True), ((4, 4), "prompt3-then-1-then-2", True),
                    ((4, 2), "prompt3-then-1-then-2", False), ((4, 2), "one-by-one", True),
                    ((6, 2), "one-by-one", False), ((4, 1), "prompt1-then-4", True), ((6, 2), "prompt1-then-4", True)])]


@pytest.mark.parametrize("heads_kv, schedule, rope, dtype", DECODE_CASES,
                         ids=[f"H{h}-kv{k}-{s}-{'rope' if r else 'norope'}-{str(d)[6:]}"
                              for (h, k), s, r, d in DECODE_CASES])
def test_cached_decoding_matches_full_forward(impl, gen, heads_kv, schedule, rope, dtype):
    n_heads, n_kv_heads = heads_kv
    batch, d_model = 2, 4 * n_heads
    chunks = SCHEDULES[schedule]
    length = chunks[-1][1]
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen, dtype=dtype)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    tables = rope_tables(16, 4, base=100.0) if rope else None
    expected = reference(state, x, n_heads, n_kv_heads, torch.ones(length, length, dtype=torch.bool).tril(), tables)
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    cache = adapters.KVCache(impl)
    kwargs = {"rope": tables} if rope else {}
    for start, stop in chunks:
        what = (Phrase("GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads})(x[:, {start}:{stop}], cache=cache",
                       d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, start=start, stop=stop)
                + (", rope=(cos, sin))" if rope else ")") + Phrase(' after {start} cached positions', start=start))
        with naming_heads(what, n_heads, n_kv_heads, 4):
            out = m(x[:, start:stop], cache=cache, **kwargs)
        check_tensor(out, what=what, shape=(batch, stop - start, d_model), dtype=dtype,
                     hint="with a cache, x holds only the new positions and so does the output")
        assert_close(out, expected[:, start:stop],
                     what=Phrase("{what}, against {span_start_stop} of the full causal forward over x[:, "
                                 ":{length}] (F.scaled_dot_product_attention, enable_gqa=True)", what=what,
                                 span_start_stop=span(start, stop), length=length),
                     hint=CACHED,
                     mistakes=mistakes.gqa_mistakes(state, x, n_heads, n_kv_heads, rope=tables, chunks=chunks,
                                                    select=lambda o, a=start, b=stop: o[:, a:b]))


@pytest.mark.parametrize("heads_kv, rope", [((4, 1), True), ((6, 2), True), ((4, 2), False)],
                         ids=["H4-kv1-rope", "H6-kv2-rope", "H4-kv2-norope"])
def test_cache_holds_kv_heads(impl, gen, heads_kv, rope):
    """The memory saving: what forward appends is n_kv_heads heads of rotated keys and of values, once per call."""
    n_heads, n_kv_heads = heads_kv
    batch, d_model = 2, 4 * n_heads
    chunks = SCHEDULES["prompt3-then-1-then-2"]
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen)
    x = randn(batch, chunks[-1][1], d_model, gen=gen)
    tables = rope_tables(16, 4, base=100.0) if rope else None
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    recorder = impl.new_trusted("RecordingKVCache")
    for start, stop in chunks:
        with naming_heads(f"GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads})(x[:, {start}:{stop}], "
                          f"cache=cache{', rope=(cos, sin)' if rope else ''})", n_heads, n_kv_heads, 4):
            m(x[:, start:stop], cache=recorder, **({"rope": tables} if rope else {}))
    updates = recorder.updates()
    if len(updates) != len(chunks):
        fail(Phrase('cache.update calls for {len_chunks} forward calls with a cache', len_chunks=len(chunks)),
             Phrase('expected {len_chunks}, got {len_updates}', len_chunks=len(chunks), len_updates=len(updates)),
             hint="each forward call appends its new keys and values with exactly one cache.update(k, v)")
    for call, ((start, stop), (k, v)) in enumerate(zip(chunks, updates)):
        keys = projected(state, x[:, start:stop], "w_k", n_kv_heads)
        if rope:
            keys = rotate(keys, *tables, torch.arange(start, stop))
        values = projected(state, x[:, start:stop], "w_v", n_kv_heads)
        where = f"forward(x[:, {start}:{stop}], cache=cache{', rope=(cos, sin)' if rope else ''})"
        hint = ("the cache holds the new positions' keys (rotated at positions start .. start + T - 1 when rope is "
                "given) and values, split into n_kv_heads heads, (B, n_kv_heads, T_new, d_k): repeat_kv comes after")
        assert_close(k, keys.float(), what=Phrase('k passed to cache.update by {where}', where=where), hint=hint,
                     mistakes=mistakes.gqa_appended_mistakes(state, x, n_heads, n_kv_heads, tables, chunks, call, 0))
        assert_close(v, values.float(), what=Phrase('v passed to cache.update by {where}', where=where), hint=hint,
                     mistakes=mistakes.gqa_appended_mistakes(state, x, n_heads, n_kv_heads, tables, chunks, call, 1))


# One module called again and again through the same rope tables (as a model's buffers are): two plain calls of
# the same shape, then two sequences of the same length decoded in turns, each with a fresh cache of its own (as a
# server decodes two prompts). Nothing one call keeps (a position counted on the module, rows looked up) may change
# another call's answer.
AGAIN_CHUNKS = [(0, 3), (3, 4), (4, 5)]


def test_same_module_called_again(impl, gen):
    batch, d_model, n_heads, n_kv_heads = 2, 16, 4, 2
    length = AGAIN_CHUNKS[-1][1]
    state = gqa_state(d_model, n_heads, n_kv_heads, gen=gen)
    tables = rope_tables(16, 4, base=100.0)
    causal = torch.ones(length, length, dtype=torch.bool).tril()
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, state)
    held = adapters.with_rope_tables(impl, m, *tables)
    xs = {"x1": randn(batch, length, d_model, gen=gen), "x2": randn(batch, length, d_model, gen=gen)}
    for name, x in xs.items():
        what = (Phrase("the same GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads}) with the same cos and "
                       "sin tensors, {name} {tuple_x_shape} with a causal mask and no cache", d_model=d_model,
                       n_heads=n_heads, n_kv_heads=n_kv_heads, name=name, tuple_x_shape=tuple(x.shape)))
        with naming_heads(what, n_heads, n_kv_heads, 4):
            out = held(x, causal)
        assert_close(out, reference(state, x, n_heads, n_kv_heads, causal, tables),
                     what=Phrase("{what}, against F.scaled_dot_product_attention(..., enable_gqa=True)", what=what), hint=WHERE,
                     mistakes=mistakes.gqa_mistakes(state, x, n_heads, n_kv_heads, mask=causal, rope=tables))
    # where a module that counts every position it was given would rotate each position of each sequence
    counted, given = {name: torch.zeros(length, dtype=torch.int64) for name in xs}, 0
    for start, stop in AGAIN_CHUNKS:
        for name in xs:
            counted[name][start:stop] = torch.arange(given, given + stop - start)
            given += stop - start
    caches = {name: adapters.KVCache(impl) for name in xs}
    for start, stop in AGAIN_CHUNKS:
        for name, x in xs.items():
            what = (Phrase("the same GroupedQueryAttention({d_model}, {n_heads}, {n_kv_heads}) with the same cos "
                           "and sin tensors, {name}[:, {start}:{stop}] with a cache of its own after {start} "
                           "cached positions", d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, name=name,
                           start=start, stop=stop))
            with naming_heads(what, n_heads, n_kv_heads, 4):
                out = held(x[:, start:stop], cache=caches[name])
            check_tensor(out, what=what, shape=(batch, stop - start, d_model), dtype=x.dtype,
                         hint="with a cache, x holds only the new positions and so does the output")
            assert_close(out, reference(state, x, n_heads, n_kv_heads, causal, tables)[:, start:stop],
                         what=Phrase("{what}, against {span_start_stop} of the full causal forward over {name}",
                                     what=what, span_start_stop=span(start, stop), name=name),
                         hint="one module decodes many sequences, each with its own cache: the new positions start "
                              "at len(cache) of the cache passed in, and nothing kept from one call may change another",
                         mistakes=mistakes.gqa_again_mistakes(state, x, n_heads, n_kv_heads, rope=tables,
                                                              chunks=AGAIN_CHUNKS, counted=counted[name],
                                                              select=lambda o, a=start, b=stop: o[:, a:b]))


def test_mask_with_cache_raises(impl, gen):
    d_model, n_heads, n_kv_heads = 16, 4, 2
    m = new_gqa(impl, d_model, n_heads, n_kv_heads, gqa_state(d_model, n_heads, n_kv_heads, gen=gen))
    x = randn(2, 3, d_model, gen=gen)
    mask = torch.ones(3, 3, dtype=torch.bool).tril()
    try:
        message = expect_value_error(m, x, mask, cache=adapters.KVCache(impl),
                                     what="GroupedQueryAttention(x, mask, cache=cache), the cache fresh and empty")
    except AssertionError as failure:  # a second look: with a position in the cache, does it raise?
        cache = adapters.KVCache(impl)
        try:
            m(x[:, :1], cache=cache)
            expect_value_error(m, x, mask, cache=cache,
                               what="GroupedQueryAttention(x, mask, cache=cache) after one cached position")
        except (AssertionError, StudentError):
            raise failure from None
        raise explained(failure, mistakes.CACHE_TRUTH_VALUE) from None
    assert message, "the ValueError should say what is wrong (a cache implies the causal mask; pass one or the other)"


def test_from_scratch(target_folder):
    """No library attention (course.yml lists it); the student's own scaled_dot_product_attention is allowed."""
    assert_from_scratch(target_folder, "grouped_query_attention")
