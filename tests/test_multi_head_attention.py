"""multi_head_attention: `scaled_dot_product_attention` and `MultiHeadAttention.forward` (no cache) in attention.py.

Expected values come from PyTorch's own `scaled_dot_product_attention` and
`nn.MultiheadAttention` (computed in float64), carrying the same injected weights.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from checklib.causal import (
    assert_no_gradient_from_future,
    assert_past_unchanged,
    causal_bool_mask,
    one_hot_grad_output,
    with_future_changed,
)
from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, explained, fail
from checklib.masks import random_mask, self_attention_mask, to_torch_attn_mask
from checklib.mistakes import multi_head_attention as mistakes
from checklib.mistakes.general import mapped
from checklib.scratch import assert_from_scratch
from checklib.weights import mha_state, randn, torch_mha
from grader.results import CheckFailure
from grader.text import Phrase

SDPA = adapters.scaled_dot_product_attention
MHA = adapters.MultiHeadAttention

# (leading dims, Tq, Tk, d, dv): 2-D and 4-D inputs, Tq != Tk, T = 1, d != dv.
SDPA_CASES = [
    ((), 4, 4, 8, 8),
    ((), 3, 5, 4, 6),
    ((2,), 5, 5, 8, 8),
    ((2, 3), 4, 6, 8, 5),
    ((1, 1), 1, 1, 4, 4),
    ((2, 2), 1, 5, 4, 3),
]
SDPA_IDS = ["lead{}-Tq{}-Tk{}-d{}-dv{}".format("x".join(map(str, c[0])) or "none", *c[1:]) for c in SDPA_CASES]

# (B, T, D, H): T = 1, H = 1, H = D, T != H.
DTYPES, DTYPE_IDS = [torch.float32, torch.float64], ["float32", "float64"]

MHA_SHAPES = [(2, 5, 8, 2), (1, 1, 6, 3), (3, 4, 4, 1), (2, 3, 4, 4), (2, 6, 12, 3)]
MHA_IDS = ["B{}-T{}-D{}-H{}".format(*s) for s in MHA_SHAPES]

SDPA_WHERE = ("weights = softmax(masked scores, dim=-1) over the keys, with scores = q @ k^T / sqrt(d); "
              "out = weights @ v")
MHA_WHERE = ("project x with w_q, w_k, w_v, split the heads, run scaled_dot_product_attention per head "
             "with the mask, merge the heads, then apply out_proj")


def sdpa_mask(kind: str, lead: tuple[int, ...], t_q: int, t_k: int, gen: torch.Generator):
    if kind == "none":
        return None
    if kind == "2d":
        return random_mask(t_q, t_k, gen=gen)
    if kind == "broadcast":  # (B, 1, Tq, Tk) for 4-D inputs, (1, Tq, Tk) otherwise
        return random_mask(*(lead[:1] + (1,) * (len(lead) - 1) if lead else (1,)), t_q, t_k, gen=gen)
    return random_mask(*lead, t_q, t_k, gen=gen)  # "full"


def reference_weights(q, k, mask):
    """softmax(q k^T / sqrt(d)) over the keys, masked entries at -inf; in float64."""
    q, k = q.double(), k.double()
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return scores.softmax(dim=-1)


def sdpa_inputs(case, dtype, gen):
    lead, t_q, t_k, d, d_v = case
    q = randn(*lead, t_q, d, gen=gen, dtype=dtype, scale=1.5)
    k = randn(*lead, t_k, d, gen=gen, dtype=dtype, scale=1.5)
    v = randn(*lead, t_k, d_v, gen=gen, dtype=dtype)
    return q, k, v


def describe(q, k, v, mask) -> str:
    m = "None" if mask is None else Phrase('bool {tuple_mask_shape}', tuple_mask_shape=tuple(mask.shape))
    return f"scaled_dot_product_attention(q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}, mask={m})"


# --- scaled_dot_product_attention ---------------------------------------------------------------


# Cases alternate between float32 and float64 (each dtype meets every kind of case across the file).
@pytest.mark.parametrize("case, dtype", [(c, DTYPES[i % 2]) for i, c in enumerate(SDPA_CASES)],
                         ids=[f"{n}-{DTYPE_IDS[i % 2]}" for i, n in enumerate(SDPA_IDS)])
def test_sdpa_shapes_and_dtypes(impl, gen, case, dtype):
    lead, t_q, t_k, d, d_v = case
    q, k, v = sdpa_inputs(case, dtype, gen)
    result = SDPA(impl)(q, k, v)
    what = describe(q, k, v, None)
    if not isinstance(result, tuple) or len(result) != 2:
        raise AssertionError(Phrase("{what}: expected a tuple (out, weights), got {type_result___name__}", what=what,
                                    type_result___name__=type(result).__name__))
    out, weights = result
    check_tensor(out, what=Phrase('out of {what}', what=what), shape=(*lead, t_q, d_v), dtype=dtype,
                 hint="out = weights @ v is (..., Tq, dv), in the inputs' dtype")
    check_tensor(weights, what=Phrase('weights of {what}', what=what), shape=(*lead, t_q, t_k), dtype=dtype,
                 hint="weights has one row per query and one column per key: (..., Tq, Tk)")


# The value checks leave out Tk = 1: softmax over one key is 1 whatever the scores, and out is v,
# which a function that echoes v (or weights of ones) gets right without the work.
VALUE_CASES = [c for c in SDPA_CASES if c[2] > 1]
SDPA_MASK_CASES = [(c, kind) for c in VALUE_CASES for kind in ("none", "2d", "broadcast", "full")
                   if c[0] or kind != "broadcast"]  # 2-D inputs take a (Tq, Tk) mask only


@pytest.mark.parametrize("case, mask_kind, dtype", [(c, k, DTYPES[i % 2]) for i, (c, k) in enumerate(SDPA_MASK_CASES)],
                         ids=[f"{SDPA_IDS[SDPA_CASES.index(c)]}-{kind}-{DTYPE_IDS[i % 2]}"
                              for i, (c, kind) in enumerate(SDPA_MASK_CASES)])
def test_sdpa_matches_torch(impl, gen, case, mask_kind, dtype):
    lead, t_q, t_k, _, _ = case
    q, k, v = sdpa_inputs(case, dtype, gen)
    mask = sdpa_mask(mask_kind, lead, t_q, t_k, gen)
    expected = F.scaled_dot_product_attention(q.double(), k.double(), v.double(), attn_mask=mask).to(dtype)
    out, _ = SDPA(impl)(q, k, v, mask)
    hint = SDPA_WHERE if mask is None else SDPA_WHERE + "; keys where the mask is False get a weight of 0"
    try:
        assert_close(out, expected, what=Phrase("out of {describe_q_k_v_mask} vs "
                                                "torch.nn.functional.scaled_dot_product_attention",
                                                describe_q_k_v_mask=describe(q, k, v, mask)),
                     hint=hint, mistakes=mistakes.sdpa_out_mistakes(q, k, v, mask, out))
    except CheckFailure as failure:  # a second call with the same inputs: does it even give the same?
        if failure.matched or not mistakes.changes_between_calls(lambda: SDPA(impl)(q, k, v, mask)[0], out):
            raise
        raise explained(failure, mistakes.RANDOM_ATTENTION) from None


WEIGHT_CASES = [(c, kind) for i, c in enumerate(VALUE_CASES) for kind in (("none", "2d", "full") * 2)[i % 3:i % 3 + 2]]


@pytest.mark.parametrize("case, mask_kind", WEIGHT_CASES,
                         ids=[f"{SDPA_IDS[SDPA_CASES.index(c)]}-{kind}" for c, kind in WEIGHT_CASES])
def test_sdpa_weights_are_softmax_of_scaled_scores(impl, gen, case, mask_kind):
    lead, t_q, t_k, _, _ = case
    q, k, v = sdpa_inputs(case, torch.float64, gen)
    mask = sdpa_mask(mask_kind, lead, t_q, t_k, gen)
    _, weights = SDPA(impl)(q, k, v, mask)
    what = Phrase('weights of {describe_q_k_v_mask}', describe_q_k_v_mask=describe(q, k, v, mask))
    weight_mistakes = mistakes.sdpa_weights_mistakes(q, k, v, mask, weights)
    check_tensor(weights, what=what, shape=(*lead, t_q, t_k), dtype=torch.float64, mistakes=weight_mistakes)
    assert_close(weights.sum(dim=-1), torch.ones(*lead, t_q, dtype=torch.float64), what=Phrase("row sums of the {what}",
                                                                                               what=what),
                 hint="each query's weights are a softmax over the keys (the last dimension), so they sum to 1",
                 mistakes=mapped(weight_mistakes, lambda w: w.sum(dim=-1)))
    if mask is not None:
        masked = weights.masked_select(~mask.expand_as(weights))
        assert_close(masked, torch.zeros_like(masked), what=Phrase('{what} where the mask is False', what=what),
                     hint="a key the mask forbids must get weight 0: fill its score with -inf (or a very "
                          "negative number) before the softmax; True means 'may attend'",
                     mistakes=mapped(weight_mistakes, lambda w: w.masked_select(~mask.expand_as(w))))
    assert_close(weights, reference_weights(q, k, mask), what=what,
                 hint="weights = softmax(q @ k^T / sqrt(d), dim=-1), d being q's last dimension",
                 mistakes=weight_mistakes)


def test_sdpa_does_not_modify_inputs(impl, gen):
    q, k, v = sdpa_inputs(((2, 2), 3, 4, 4, 4), torch.float32, gen)
    mask = random_mask(3, 4, gen=gen)
    _, after = SDPA(impl).call_returning_args(q, k, v, mask)
    for name, before, now in zip("qkv", (q, k, v), after):
        assert_equal(now, before, what=Phrase('{name} after scaled_dot_product_attention', name=name),
                     hint="functions must not modify their inputs in place (e.g. masked_fill_ on a view)")
    assert_equal(after[3], mask, what="mask after scaled_dot_product_attention",
                 hint="functions must not modify their inputs in place")


@pytest.mark.parametrize("lead, length", [((), 5), ((2, 2), 4), ((3,), 6)])
def test_sdpa_causal_no_leakage(impl, gen, lead, length):
    q, k, v = sdpa_inputs((lead, length, length, 4, 4), torch.float32, gen)
    mask = causal_bool_mask(length)
    sdpa = SDPA(impl)
    out, _ = sdpa(q, k, v, mask)
    hint = "with a causal mask (torch.tril), position i may only see keys j <= i: check that the mask reaches the scores"
    for position in range(1, length):
        changed = [with_future_changed(t, position, gen) for t in (q, k, v)]
        out2, _ = sdpa(*changed, mask)
        assert_past_unchanged(out, out2, position,
                              what=Phrase("out[..., :{position}, :] of scaled_dot_product_attention with a causal "
                                          "mask after changing q, k, v from position {position} on",
                                          position=position), hint=hint)
    for position in range(length - 1):
        g = one_hot_grad_output(out.shape, position, gen)
        grads = sdpa.grad(q, k, v, mask, grad_output=g, output_index=0)["args"]
        for name, grad in zip("qkv", grads):
            check_tensor(grad, what=Phrase("gradient of scaled_dot_product_attention's out w.r.t. {name}", name=name),
                         hint="the output must be computed from q, k and v with differentiable tensor operations")
            assert_no_gradient_from_future(grad, position,
                                           what=Phrase("d out[..., {position}, :] / d {name}[..., {position_1}:, "
                                                       ":] with a causal mask", position=position, name=name,
                                                       position_1=position + 1), hint=hint)


# --- MultiHeadAttention.forward ------------------------------------------------------------------


def new_mha(impl, d_model, n_heads, state, bias=True):
    m = MHA(impl, d_model, n_heads, bias=bias)
    if next(iter(state.values())).dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    return m


def mha_expected(state, x, mask, d_model, n_heads):
    """(out, per-head weights) of nn.MultiheadAttention in float64 carrying `state`."""
    state64 = {k: v.double() for k, v in state.items()}
    ref = torch_mha(state64, d_model, n_heads)
    x64 = x.double()
    batch, length, _ = x.shape
    with torch.no_grad():
        out, weights = ref(x64, x64, x64, attn_mask=to_torch_attn_mask(mask, batch, n_heads, length),
                           need_weights=True, average_attn_weights=False)
    return out.to(x.dtype), weights.to(x.dtype)


@pytest.mark.parametrize("shape, dtype", [(s, DTYPES[i % 2]) for i, s in enumerate(MHA_SHAPES)],
                         ids=[f"{n}-{DTYPE_IDS[i % 2]}" for i, n in enumerate(MHA_IDS)])
def test_mha_shapes_and_dtypes(impl, gen, shape, dtype):
    batch, length, d_model, n_heads = shape
    state = mha_state(d_model, gen=gen, dtype=dtype)
    m = new_mha(impl, d_model, n_heads, state)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    out = m(x)
    check_tensor(out, what=f"MultiHeadAttention({d_model}, {n_heads})(x {tuple(x.shape)})",
                 shape=(batch, length, d_model), dtype=dtype,
                 hint="the output has the input's shape (B, T, D): merge the heads back before out_proj")
    weights = m.attr("last_attention")
    check_tensor(weights, what=Phrase("last_attention after MultiHeadAttention({d_model}, {n_heads})(x "
                                      "{tuple_x_shape})", d_model=d_model, n_heads=n_heads,
                                      tuple_x_shape=tuple(x.shape)),
                 shape=(batch, n_heads, length, length), dtype=dtype,
                 hint="store the attention weights of every head, (B, H, T, T), in self.last_attention",
                 mistakes=mistakes.mha_weights_mistakes(state, x, None, n_heads, weights))


MHA_CASES = [
    # (shape, mask kind, bias, dtype)
    # every shape with two of the five mask kinds, every kind with two shapes
    *[(s, kind, True, torch.float32) for i, s in enumerate(MHA_SHAPES)
      for kind in (("none", "causal", "2d", "batch", "heads") * 2)[2 * i:2 * i + 2]],
    ((2, 5, 8, 2), "none", False, torch.float32),
    ((2, 5, 8, 2), "heads", False, torch.float64),
    ((2, 3, 4, 4), "batch", True, torch.float64),
    ((2, 6, 12, 3), "causal", True, torch.float64),
]


@pytest.mark.parametrize(
    "shape, mask_kind, bias, dtype", MHA_CASES,
    ids=["B{}-T{}-D{}-H{}".format(*c[0]) + f"-{c[1]}-{'bias' if c[2] else 'nobias'}-{str(c[3])[6:]}" for c in MHA_CASES],
)
def test_mha_matches_torch(impl, gen, shape, mask_kind, bias, dtype):
    batch, length, d_model, n_heads = shape
    state = mha_state(d_model, gen=gen, dtype=dtype, bias=bias)
    m = new_mha(impl, d_model, n_heads, state, bias=bias)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    mask = self_attention_mask(mask_kind, batch, n_heads, length, gen)
    expected_out, expected_weights = mha_expected(state, x, mask, d_model, n_heads)
    call = (f"MultiHeadAttention({d_model}, {n_heads}, bias={bias})(x {tuple(x.shape)}, "
            f"mask={'None' if mask is None else 'bool ' + str(tuple(mask.shape))})")
    out = m(x, mask)
    weights = m.attr("last_attention")
    weight_mistakes = mistakes.mha_weights_mistakes(state, x, mask, n_heads, weights)
    check_tensor(weights, what=Phrase("last_attention after {call}", call=call), shape=(batch, n_heads, length, length), dtype=dtype,
                 hint="keep the weights of every head, (B, H, T, T), in self.last_attention", mistakes=weight_mistakes)
    assert_close(weights, expected_weights,
                 what=Phrase("last_attention after {call} vs nn.MultiheadAttention's per-head weights", call=call),
                 hint="weights come from the projected, head-split q and k (scaled by sqrt(Dh), masked, softmax "
                      "over the keys); the mask broadcasts over (B, H, T, T)", mistakes=weight_mistakes)
    assert_close(out, expected_out, what=Phrase("{call} vs nn.MultiheadAttention with the same weights", call=call), hint=MHA_WHERE,
                 mistakes=mistakes.mha_out_mistakes(state, x, mask, n_heads, out))


def test_mha_last_attention_follows_latest_call(impl, gen):
    d_model, n_heads = 8, 2
    state = mha_state(d_model, gen=gen)
    m = new_mha(impl, d_model, n_heads, state)
    before = m.attr("last_attention")
    if before is not None:
        raise AssertionError(Phrase("last_attention before the first call: expected None, got "
                                    "{type_before___name__}", type_before___name__=type(before).__name__))
    x1 = randn(2, 5, d_model, gen=gen)
    m(x1)
    x2 = randn(3, 4, d_model, gen=gen)
    mask = random_mask(3, 1, 4, 4, gen=gen)
    m(x2, mask)
    _, expected = mha_expected(state, x2, mask, d_model, n_heads)
    assert_close(m.attr("last_attention"), expected, what="last_attention after a (2, 5, 8) call then a masked (3, 4, 8) call",
                 hint="self.last_attention holds the weights of the latest call, (B, H, Tq, Tk), replaced on every call")


def test_mha_last_attention_is_detached(impl, gen):
    """Hygiene: the stored weights are detached, as the contract says; pays only when the forward is right."""
    d_model, n_heads, batch, length = 8, 2, 2, 5
    state = mha_state(d_model, gen=gen)
    m = new_mha(impl, d_model, n_heads, state)
    x = randn(batch, length, d_model, gen=gen)
    mask = causal_bool_mask(length)
    out = m(x, mask)
    call = Phrase("MultiHeadAttention({d_model}, {n_heads})(x {tuple_x_shape}, causal mask)", d_model=d_model,
                  n_heads=n_heads, tuple_x_shape=tuple(x.shape))
    expected_out, expected = mha_expected(state, x, mask, d_model, n_heads)
    assert_close(out, expected_out, what=Phrase("{call} vs nn.MultiheadAttention with the same weights", call=call), hint=MHA_WHERE)
    assert_close(m.attr("last_attention"), expected, what=Phrase('last_attention after {call}', call=call),
                 hint="self.last_attention holds the weights of the latest call, (B, H, Tq, Tk)")
    info = m.tensor_info("last_attention")
    if info["requires_grad"] or info["has_grad_fn"]:
        fail(Phrase('last_attention after {call}', call=call), "expected a detached tensor, got one that "
             + ("has a grad_fn (it is still part of the autograd graph)" if info["has_grad_fn"] else "requires grad"),
             hint="store weights.detach(): kept for inspection, attached weights hold the whole graph of the "
                  "forward alive and let a later backward() flow through them")


@pytest.mark.parametrize("shape", [(2, 6, 8, 2), (1, 5, 6, 3), (2, 4, 4, 4)], ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_mha_permutation_equivariance(impl, gen, shape):
    batch, length, d_model, n_heads = shape
    m = new_mha(impl, d_model, n_heads, mha_state(d_model, gen=gen))
    x = randn(batch, length, d_model, gen=gen)
    perm = torch.randperm(length, generator=gen)
    while length > 1 and bool((perm == torch.arange(length)).all()):
        perm = torch.randperm(length, generator=gen)
    out = m(x)
    out_perm = m(x[:, perm])
    hint = ("without positional encoding and without a mask, attention treats the tokens as a set: "
            "mix information only along the sequence dimension through the attention weights")
    assert_close(out_perm, out[:, perm], what=Phrase("MultiHeadAttention(x[:, {perm_tolist}]) vs "
                                                     "MultiHeadAttention(x)[:, perm]", perm_tolist=perm.tolist()),
                 hint=hint)
    assert_close(out_perm.mean(dim=1), out.mean(dim=1), what="mean over tokens of MultiHeadAttention(permuted x)",
                 hint=hint)


@pytest.mark.parametrize("shape", [(2, 5, 8, 2), (1, 4, 6, 6), (2, 6, 6, 1)], ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_mha_causal_no_leakage(impl, gen, shape):
    batch, length, d_model, n_heads = shape
    m = new_mha(impl, d_model, n_heads, mha_state(d_model, gen=gen))
    x = randn(batch, length, d_model, gen=gen)
    mask = causal_bool_mask(length)
    out = m(x, mask)
    hint = ("with a causal (T, T) mask, output i may only depend on tokens j <= i: "
            "pass the mask to scaled_dot_product_attention for every head")
    for position in range(1, length):
        out2 = m(with_future_changed(x, position, gen), mask)
        assert_past_unchanged(out, out2, position,
                              what=Phrase("MultiHeadAttention(x, causal mask)[:, :{position}] after changing x "
                                          "from position {position} on", position=position), hint=hint)
    for position in range(length - 1):
        g = one_hot_grad_output(out.shape, position, gen)
        grad = m.grad(x, mask, grad_output=g)["args"][0]
        check_tensor(grad, what="gradient of MultiHeadAttention(x, mask) w.r.t. x", shape=x.shape,
                     hint="the output must be computed from x with differentiable tensor operations")
        assert_no_gradient_from_future(grad, position,
                                       what=Phrase("d out[:, {position}] / d x[:, {position_1}:] with a causal mask",
                                                   position=position, position_1=position + 1),
                                       hint=hint)


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for multi_head_attention)."""
    assert_from_scratch(target_folder, "multi_head_attention")
