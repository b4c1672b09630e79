"""pre_ln_block: `TransformerBlock` in block.py.

Expected values come from `nn.TransformerEncoderLayer(norm_first=True, activation="relu",
dropout=0, batch_first=True)` carrying the same injected weights, computed in float64.
"""
from __future__ import annotations

import pytest
import torch

from checklib.causal import (
    assert_no_gradient_from_future,
    assert_past_unchanged,
    causal_bool_mask,
    one_hot_grad_output,
    vjp_chain,
    with_future_changed,
)
from checklib import adapters
from checklib.compare import (assert_close, assert_equal, assert_not_close, check_tensor, diagnose, explained, fail,
                              rediagnosed)
from checklib.masks import self_attention_mask, to_torch_attn_mask
from checklib.mistakes import pre_ln_block as mistakes
from checklib.scratch import assert_from_scratch
from checklib.weights import block_state, randn, torch_encoder_layer
from grader.results import CheckFailure
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

BLOCK = adapters.TransformerBlock

DTYPES, DTYPE_IDS = [torch.float32, torch.float64], ["float32", "float64"]

# (B, T, D, H, d_ff): T = 1, H = 1, H = D, T != H.
SHAPES = [(2, 5, 8, 2, 16), (1, 1, 6, 3, 12), (3, 4, 4, 1, 8), (2, 3, 4, 4, 10), (2, 6, 12, 3, 20)]
SHAPE_IDS = ["B{}-T{}-D{}-H{}-ff{}".format(*s) for s in SHAPES]

WHERE = ("Pre-LN: x = x + dropout(attention(norm1(x), mask)), then x = x + dropout(ff(norm2(x))), "
         "with ff = Linear(D, d_ff), ReLU, Linear(d_ff, D)")


def mask_text(mask) -> str:
    return "None" if mask is None else Phrase('bool {tuple_mask_shape}', tuple_mask_shape=tuple(mask.shape))


def new_block(impl, d_model, n_heads, d_ff, state, dropout=0.3):
    """The student's block with injected weights, in eval mode."""
    m = BLOCK(impl, d_model, n_heads, d_ff, dropout=dropout)
    if next(iter(state.values())).dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    m.eval()
    return m


def reference(state, d_model, n_heads, d_ff):
    """nn.TransformerEncoderLayer in float64 carrying `state`."""
    return torch_encoder_layer({k: v.double() for k, v in state.items()}, d_model, n_heads, d_ff)


def expected_output(state, x, mask, d_model, n_heads, d_ff):
    layer = reference(state, d_model, n_heads, d_ff)
    batch, length, _ = x.shape
    # Grad mode on keeps PyTorch off its fused inference path: the plain computation is the reference.
    out = layer(x.double(), src_mask=to_torch_attn_mask(mask, batch, n_heads, length))
    return out.detach().to(x.dtype)


@pytest.mark.parametrize("shape, dtype", [(s, DTYPES[i % 2]) for i, s in enumerate(SHAPES)],
                         ids=[f"{n}-{DTYPE_IDS[i % 2]}" for i, n in enumerate(SHAPE_IDS)])
def test_block_shapes_and_dtypes(impl, gen, shape, dtype):
    batch, length, d_model, n_heads, d_ff = shape
    m = new_block(impl, d_model, n_heads, d_ff, block_state(d_model, d_ff, gen=gen, dtype=dtype))
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    check_tensor(m(x), what=f"TransformerBlock({d_model}, {n_heads}, {d_ff})(x {tuple(x.shape)})",
                 shape=(batch, length, d_model), dtype=dtype,
                 hint="the block maps (B, T, D) to (B, T, D): both residual branches must return D features",
                 mistakes=mistakes.squeeze_mistakes(x))


def assert_eval_output(m, args: tuple, out, expected: torch.Tensor, **compare) -> None:
    """assert_close(out, expected) for m(*args) in eval mode; a failure that a second call tells apart from the
    first (randomness in eval mode) is named."""
    try:
        assert_close(out, expected, **compare)
    except CheckFailure as failure:
        if isinstance(out, torch.Tensor) and out.shape == expected.shape:
            again = m(*args)
            if isinstance(again, torch.Tensor) and again.shape == out.shape and not torch.equal(again, out):
                raise explained(failure, mistakes.DROPOUT_IN_EVAL) from None
        raise


def test_block_submodule_names(impl, gen):
    d_model, n_heads, d_ff = 8, 2, 12
    state = block_state(d_model, d_ff, gen=gen)
    m = BLOCK(impl, d_model, n_heads, d_ff, dropout=0.1)
    got = m.state_dict()
    missing, extra = sorted(set(state) - set(got)), sorted(set(got) - set(state))
    if missing or extra:
        fail(f"TransformerBlock({d_model}, {n_heads}, {d_ff}).state_dict()",
             Phrase('missing keys {missing}, unexpected keys {extra}', missing=missing, extra=extra),
             hint="name the submodules attention (MultiHeadAttention with bias), norm1, norm2, "
                  "ff = nn.Sequential(Linear, ReLU, Linear) (so ff.0 and ff.2), dropout")
    for key, value in state.items():
        check_tensor(got[key], what=Phrase("state_dict()['{key}'] of TransformerBlock({d_model}, {n_heads}, {d_ff})",
                                           key=key, d_model=d_model, n_heads=n_heads, d_ff=d_ff),
                     shape=value.shape, hint="ff.0 is Linear(d_model, d_ff), ff.2 is Linear(d_ff, d_model); "
                                             "norm1 and norm2 are LayerNorm(d_model)",
                     mistakes=mistakes.ff_width_mistakes(key, d_model, n_heads, d_ff))
    m.load_weights(state)
    back = m.state_dict()
    for key in ("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"):
        assert_equal(back[key], state[key], what=Phrase("state_dict()['{key}'] after loading different norm1 and "
                                                        "norm2 weights", key=key),
                     hint="norm1 and norm2 must be two separate nn.LayerNorm(d_model) objects, not one shared twice",
                     mistakes=mistakes.shared_norm_mistakes(state, key))


BLOCK_CASES = [
    # every shape with two of the five mask kinds, every kind with two shapes
    *[(s, kind, torch.float32) for i, s in enumerate(SHAPES)
      for kind in (("none", "causal", "2d", "batch", "heads") * 2)[2 * i:2 * i + 2]],
    ((2, 5, 8, 2, 16), "none", torch.float64),
    ((2, 3, 4, 4, 10), "heads", torch.float64),
    ((2, 6, 12, 3, 20), "causal", torch.float64),
    ((3, 4, 4, 1, 8), "batch", torch.float64),
]


@pytest.mark.parametrize("shape, mask_kind, dtype", BLOCK_CASES,
                         ids=[f"{SHAPE_IDS[SHAPES.index(s)]}-{k}-{str(d)[6:]}" for s, k, d in BLOCK_CASES])
def test_block_matches_torch_encoder_layer(impl, gen, shape, mask_kind, dtype):
    batch, length, d_model, n_heads, d_ff = shape
    state = block_state(d_model, d_ff, gen=gen, dtype=dtype)
    m = new_block(impl, d_model, n_heads, d_ff, state, dropout=0.3)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    mask = self_attention_mask(mask_kind, batch, n_heads, length, gen)
    out = m(x, mask)
    assert_eval_output(m, (x, mask), out, expected_output(state, x, mask, d_model, n_heads, d_ff),
                 what=Phrase("TransformerBlock({d_model}, {n_heads}, {d_ff}, dropout=0.3).eval()(x "
                             "{tuple_x_shape}, mask={mask_text_mask}) vs "
                             "nn.TransformerEncoderLayer(norm_first=True) with the same weights", d_model=d_model,
                             n_heads=n_heads, d_ff=d_ff, tuple_x_shape=tuple(x.shape),
                             mask_text_mask=mask_text(mask)),
                 hint=WHERE + "; pass the mask on to the attention; eval mode turns dropout off",
                 mistakes=mistakes.block_mistakes(state, x, mask, n_heads, out))


def test_block_dropout_only_in_train_mode(impl, gen):
    d_model, n_heads, d_ff = 8, 2, 16
    state = block_state(d_model, d_ff, gen=gen)
    m = new_block(impl, d_model, n_heads, d_ff, state, dropout=0.5)
    x = randn(2, 6, d_model, gen=gen)
    expected = expected_output(state, x, None, d_model, n_heads, d_ff)
    call = f"TransformerBlock({d_model}, {n_heads}, {d_ff}, dropout=0.5)"
    assert_eval_output(m, (x,), m(x), expected, what=Phrase("{call}.eval()(x) vs nn.TransformerEncoderLayer "
                                                            "without dropout", call=call),
                 hint="in eval mode dropout must do nothing: use the nn.Dropout submodule (it follows "
                      "train()/eval()) rather than F.dropout(..., training=True)",
                 mistakes=mistakes.block_mistakes(state, x, None, n_heads))
    m.train()
    first, second = m(x), m(x)
    try:
        assert_not_close(first, expected, what=Phrase('{call} in train mode vs the same block in eval mode', call=call),
                         hint="in train mode dropout must be applied to the attention and feed-forward branches "
                              "before they are added back to x")
    except CheckFailure as failure:
        if isinstance(first, torch.Tensor) and first.shape == expected.shape:  # equal, not of another shape
            raise explained(failure, mistakes.NO_DROPOUT) from None
        raise
    assert_not_close(first, second, what=Phrase('two calls of {call} in train mode', call=call),
                     hint="train-mode dropout draws a fresh random mask on every call")
    m.eval()
    assert_close(m(x), expected, what=Phrase('{call} back in eval mode after train mode', call=call),
                 hint="eval() must turn dropout off again")
    # With every value dropped, each branch adds nothing: a Pre-LN block passes its input through.
    every = new_block(impl, d_model, n_heads, d_ff, state, dropout=1.0)
    every.train()
    what = Phrase("TransformerBlock({d_model}, {n_heads}, {d_ff}, dropout=1.0) in train mode (every branch "
                  "dropped, so x itself)", d_model=d_model, n_heads=n_heads, d_ff=d_ff)
    hint = "dropout applies to each branch's output before it is added to x: x + dropout(branch)"
    try:
        assert_close(every(x), x, what=what, hint=hint, mistakes=mistakes.dropped_residual_mistakes(x, state, n_heads))
    except CheckFailure as failure:
        if failure.matched:
            raise
        try:  # the contract's submodule `dropout`: is its rate the one the block was given?
            rate = every.attr("dropout").attr("p")
        except (StudentError, AttributeError):
            raise failure from None
        raise rediagnosed(failure, diagnose(rate, mistakes.dropout_rate_mistakes(rate, 1.0))) from None
    # Built without the argument, the block drops at the contract's default rate, 0.1, in train mode.
    default = BLOCK(impl, d_model, n_heads, d_ff)
    default.load_weights(state)
    default.train()
    what = Phrase("TransformerBlock({d_model}, {n_heads}, {d_ff}) in train mode (the default dropout=0.1) vs eval "
                  "mode", d_model=d_model, n_heads=n_heads, d_ff=d_ff)
    hint = "dropout defaults to 0.1: __init__(d_model, n_heads, d_ff, dropout=0.1)"
    try:
        assert_not_close(default(x), expected, what=what, hint=hint)
    except CheckFailure as failure:
        try:
            rate = default.attr("dropout").attr("p")
        except (StudentError, AttributeError):
            raise failure from None
        raise explained(failure, mistakes.BLOCK_DROPOUT_DEFAULT.text(rate=rate)) from None


@pytest.mark.parametrize("mask_kind", ["none", "causal"])
def test_block_gradients_reach_every_parameter(impl, gen, mask_kind):
    batch, length, d_model, n_heads, d_ff = 2, 5, 8, 2, 16
    state = block_state(d_model, d_ff, gen=gen, dtype=torch.float64)
    m = new_block(impl, d_model, n_heads, d_ff, state)
    x = randn(batch, length, d_model, gen=gen, dtype=torch.float64)
    mask = self_attention_mask(mask_kind, batch, n_heads, length, gen)
    g = randn(batch, length, d_model, gen=gen, dtype=torch.float64)
    grads = m.grad(x, mask, grad_output=g)
    call = f"TransformerBlock({d_model}, {n_heads}, {d_ff}).eval()(x, mask={mask_text(mask)})"
    for name in state:
        grad = grads["params"].get(name)
        if grad is None:
            fail(Phrase('gradient of {call} w.r.t. {name}', call=call, name=name), "no gradient reached it",
                 hint="every parameter must be used in forward, with no .detach() or torch.no_grad() in between")
        # The key bias shifts every score of a query equally, so softmax cancels it: its gradient is zero.
        if name != "attention.w_k.bias" and not bool(grad.ne(0).any()):
            fail(Phrase("gradient of {call} w.r.t. {name}", call=call, name=name), "it is all zeros", hint=Phrase("{name} must influence the output "
                                                                                                                  "({WHERE})",
                                                                                                                  name=name,
                                                                                                                  WHERE=WHERE))
    layer = reference(state, d_model, n_heads, d_ff)
    x_ref = x.clone().requires_grad_(True)
    (layer(x_ref, src_mask=to_torch_attn_mask(mask, batch, n_heads, length)) * g).sum().backward()
    assert_close(grads["args"][0], x_ref.grad, what=Phrase("gradient of {call} w.r.t. x vs "
                                                           "nn.TransformerEncoderLayer's", call=call),
                 hint="both residual paths must carry the gradient straight back to x: " + WHERE,
                 mistakes=mistakes.block_grad_mistakes(state, x, mask, n_heads, g))


@pytest.mark.parametrize("shape", [(2, 6, 8, 2, 16), (1, 5, 6, 3, 12), (2, 4, 4, 4, 8)],
                         ids=lambda s: "B{}-T{}-D{}-H{}-ff{}".format(*s))
def test_block_permutation_equivariance(impl, gen, shape):
    batch, length, d_model, n_heads, d_ff = shape
    m = new_block(impl, d_model, n_heads, d_ff, block_state(d_model, d_ff, gen=gen))
    x = randn(batch, length, d_model, gen=gen)
    perm = torch.randperm(length, generator=gen)
    while bool((perm == torch.arange(length)).all()):
        perm = torch.randperm(length, generator=gen)
    out, out_perm = m(x), m(x[:, perm])
    hint = ("without positional encoding or a mask, only attention mixes tokens, and it treats them as a set; "
            "LayerNorm and the feed-forward act on each token separately (normalise over the last dimension)")
    assert_close(out_perm, out[:, perm], what=Phrase("TransformerBlock(x[:, {perm_tolist}]) vs "
                                                     "TransformerBlock(x)[:, perm]", perm_tolist=perm.tolist()),
                 hint=hint)
    assert_close(out_perm.mean(dim=1), out.mean(dim=1), what="mean over tokens of TransformerBlock(permuted x)", hint=hint)


def test_block_leaves_input_alone(impl, gen):
    """Functions never modify their inputs: the residuals are new tensors, not additions into the caller's x."""
    batch, length, d_model, n_heads, d_ff = 2, 5, 8, 2, 16
    m = new_block(impl, d_model, n_heads, d_ff, block_state(d_model, d_ff, gen=gen))
    x = randn(batch, length, d_model, gen=gen)
    _, (after, _) = m.call_returning_args(x, causal_bool_mask(length))
    assert_close(after, x, what=Phrase("x {tuple_x_shape} after TransformerBlock's forward",
                                       tuple_x_shape=tuple(x.shape)),
                 hint="forward must not modify the caller's x: add each residual into a new tensor, "
                      "x = x + self.dropout(...), not x += ... (an in-place add writes into the tensor the caller "
                      "passed)")


CAUSAL_HINT = ("with a causal mask, output i may only depend on tokens j <= i: pass the mask to the attention; "
               "LayerNorm and the feed-forward must act on each token separately")


@pytest.mark.parametrize("shape", [(2, 5, 8, 2, 16), (1, 4, 6, 6, 12), (2, 6, 6, 1, 8)],
                         ids=lambda s: "B{}-T{}-D{}-H{}-ff{}".format(*s))
def test_block_causal_no_leakage(impl, gen, shape):
    batch, length, d_model, n_heads, d_ff = shape
    m = new_block(impl, d_model, n_heads, d_ff, block_state(d_model, d_ff, gen=gen))
    x = randn(batch, length, d_model, gen=gen)
    mask = causal_bool_mask(length)
    out = m(x, mask)
    for position in range(1, length):
        out2 = m(with_future_changed(x, position, gen), mask)
        assert_past_unchanged(out, out2, position, what=Phrase("TransformerBlock(x, causal mask)[:, :{position}] "
                                                               "after changing x from position {position} on",
                                                               position=position), hint=CAUSAL_HINT)
    for position in range(length - 1):
        grad = m.grad(x, mask, grad_output=one_hot_grad_output(out.shape, position, gen))["args"][0]
        check_tensor(grad, what="gradient of TransformerBlock(x, mask) w.r.t. x", shape=x.shape,
                     hint="the output must be computed from x with differentiable tensor operations")
        assert_no_gradient_from_future(grad, position, what=Phrase("d out[:, {position}] / d x[:, {position_1}:] "
                                                                   "of TransformerBlock with a causal mask",
                                                                   position=position, position_1=position + 1), hint=CAUSAL_HINT)


def test_two_block_stack_causal_no_leakage(impl, gen):
    batch, length, d_model, n_heads, d_ff = 2, 6, 8, 2, 16
    blocks = [new_block(impl, d_model, n_heads, d_ff, block_state(d_model, d_ff, gen=gen)) for _ in range(2)]
    mask = causal_bool_mask(length)

    def stack(x):
        hidden = blocks[0](x, mask)
        return hidden, blocks[1](hidden, mask)

    x = randn(batch, length, d_model, gen=gen)
    hidden, out = stack(x)
    for position in range(1, length):
        _, out2 = stack(with_future_changed(x, position, gen))
        assert_past_unchanged(out, out2, position, what=Phrase("two stacked TransformerBlocks (causal mask)[:, "
                                                               ":{position}] after changing x from position "
                                                               "{position} on", position=position), hint=CAUSAL_HINT)
    grads = [lambda inp, g, b=b: b.grad(inp, mask, grad_output=g)["args"][0] for b in blocks]
    for position in range(length - 1):
        grad = vjp_chain(grads, [x, hidden], one_hot_grad_output(out.shape, position, gen))
        check_tensor(grad, what="gradient of two stacked TransformerBlocks w.r.t. x", shape=x.shape,
                     hint="the output must be computed from x with differentiable tensor operations")
        assert_no_gradient_from_future(grad, position, what=Phrase("d out[:, {position}] / d x[:, {position_1}:] "
                                                                   "of two stacked TransformerBlocks with a causal "
                                                                   "mask", position=position,
                                                                   position_1=position + 1),
                                       hint=CAUSAL_HINT)


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for pre_ln_block)."""
    assert_from_scratch(target_folder, "pre_ln_block")
