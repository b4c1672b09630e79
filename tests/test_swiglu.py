"""swiglu: `SwiGLU` in ffn.py.

PyTorch has no SwiGLU module: expected values are computed here from the contract,
`F.linear(F.silu(F.linear(x, W_gate)) * F.linear(x, W_up), W_down)`, with injected
weights, in float64.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, check_tensor, fail
from checklib.mistakes import swiglu as mistakes
from checklib.mistakes.general import loaded_shapes
from checklib.weights import randn, swiglu_state
from grader.sandbox.protocol import StudentError
from checklib.student import where
from grader.text import Phrase

FFN = adapters.SwiGLU
WHERE = "w_down(silu(w_gate(x)) * w_up(x)), silu(z) = z * sigmoid(z), every layer without bias"
KEYS = {"w_gate.weight", "w_up.weight", "w_down.weight"}


def new_ffn(impl, d_model: int, d_ff: int, state: dict):
    m = FFN(impl, d_model, d_ff)
    if state["w_gate.weight"].dtype == torch.float64:
        m.to(torch.float64)
    m.load_weights(state)
    return m


def run(call, what: str, d_model: int, d_ff: int, *args, **kwargs):
    """A call of the student's SwiGLU; a load of the weights that failed on the layers' sizes gets the diagnosis
    of the hidden width they reveal."""
    try:
        return call(*args, **kwargs)
    except StudentError as exc:
        expected = mistakes.swiglu_shapes(d_model, d_ff)
        shapes = loaded_shapes(exc.message, expected) if type(exc) is StudentError else None
        if shapes is None:
            raise
        fail(what, Phrase("loading the weights failed: {exc_type_name}: {exc_message}", exc_type_name=exc.type_name,
                          exc_message=exc.message) + where(exc),
             hint="w_gate and w_up are nn.Linear(d_model, d_ff), w_down is nn.Linear(d_ff, d_model)", actual=shapes,
             expected=expected, mistakes=mistakes.swiglu_width_mistakes(d_model, d_ff))


def reference(state: dict, x: torch.Tensor) -> torch.Tensor:
    s = {k: v.double() for k, v in state.items()}
    x = x.double()
    return F.linear(F.silu(F.linear(x, s["w_gate.weight"])) * F.linear(x, s["w_up.weight"]), s["w_down.weight"])


def test_state_dict_layout(impl):
    d_model, d_ff = 6, 14  # int(2 * d_ff / 3), 4 * d_model, ... each another width
    got = FFN(impl, d_model, d_ff).state_dict()
    what = f"SwiGLU({d_model}, {d_ff}).state_dict()"
    if set(got) != KEYS:
        fail(what, Phrase("missing keys {sorted_KEYS_set_got}, unexpected keys {sorted_set_got_KEYS}",
                          sorted_KEYS_set_got=sorted(KEYS - set(got)), sorted_set_got_KEYS=sorted(set(got) - KEYS)),
             hint="three nn.Linear(..., bias=False) named w_gate, w_up and w_down", actual=set(got),
             mistakes=mistakes.swiglu_key_mistakes(KEYS))
    for key, shape in mistakes.swiglu_shapes(d_model, d_ff).items():
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape, dtype=torch.float32,
                     hint="w_gate and w_up are nn.Linear(d_model, d_ff), w_down is nn.Linear(d_ff, d_model) "
                          "(nn.Linear stores its weight as (out_features, in_features))",
                     mistakes=mistakes.swiglu_shape_mistakes(d_model, d_ff, key))


# (x shape, d_ff, dtype): d_ff above, below and equal to d_model; 1-D to 4-D inputs
CASES = [
    ((2, 5, 8), 12, torch.float32),
    ((2, 5, 8), 12, torch.float64),
    ((3, 16), 8, torch.float64),
    ((6,), 16, torch.float32),
    ((2, 3, 4, 6), 16, torch.float64),
    ((1, 1, 6), 6, torch.float32),
    ((4, 7, 12), 32, torch.float32),
]


@pytest.mark.parametrize("shape, d_ff, dtype", CASES,
                         ids=[f"{'x'.join(map(str, s))}-ff{f}-{str(d)[6:]}" for s, f, d in CASES])
def test_matches_reference(impl, gen, shape, d_ff, dtype):
    d_model = shape[-1]
    state = swiglu_state(d_model, d_ff, gen=gen, dtype=dtype)
    x = randn(*shape, gen=gen, dtype=dtype, scale=2.0)  # pre-activations beyond ±2, where silu, GELU and ReLU part
    m = new_ffn(impl, d_model, d_ff, state)
    what = Phrase("SwiGLU({d_model}, {d_ff})(x {tuple_x_shape}, {str_dtype_6}) vs the contract's formula with the "
                  "same weights", d_model=d_model, d_ff=d_ff, tuple_x_shape=tuple(x.shape),
                  str_dtype_6=str(dtype)[6:])
    assert_close(run(m, what, d_model, d_ff, x), reference(state, x).to(dtype), what=what, hint=WHERE,
                 mistakes=mistakes.swiglu_mistakes(x, state))


def test_gradients_match_reference(impl, gen):
    d_model, d_ff = 8, 14  # no width of mistakes.HIDDEN_WIDTHS is another one here
    state = swiglu_state(d_model, d_ff, gen=gen, dtype=torch.float64)
    x = randn(2, 5, d_model, gen=gen, dtype=torch.float64)
    g = randn(2, 5, d_model, gen=gen, dtype=torch.float64)
    m = new_ffn(impl, d_model, d_ff, state)
    what = Phrase("gradient of SwiGLU({d_model}, {d_ff})(x {tuple_x_shape})", d_model=d_model, d_ff=d_ff,
                  tuple_x_shape=tuple(x.shape))
    grads = run(m.grad, what, d_model, d_ff, x, grad_output=g)
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    x_ref = x.clone().requires_grad_(True)
    (reference(params, x_ref) * g).sum().backward()
    assert_close(grads["args"][0], x_ref.grad, what=Phrase("{what} w.r.t. x vs the contract's formula", what=what),
                 hint="compute the output from x with differentiable tensor operations (no .detach(), no torch.no_grad())",
                 mistakes=mistakes.swiglu_grad_mistakes(x, state, g))
    for key, param in params.items():
        got = grads["params"].get(key)
        if got is None:
            fail(Phrase("gradient of {call} w.r.t. {name}", call=f"SwiGLU({d_model}, {d_ff})(x {tuple(x.shape)})", name=key),
                 "no gradient reached it",
                 hint=Phrase('{key_split_0} must be used in forward: ', key_split_0=key.split('.')[0]) + WHERE)
        assert_close(got, param.grad, what=Phrase("{what} w.r.t. {key} vs the contract's formula", what=what,
                                                  key=key), hint=WHERE)


def test_position_wise(impl, gen):
    """A feed-forward network acts on every position alone: shuffling positions shuffles the output."""
    d_model, d_ff = 8, 20  # no width of mistakes.HIDDEN_WIDTHS is another one here
    m = new_ffn(impl, d_model, d_ff, swiglu_state(d_model, d_ff, gen=gen))
    x = randn(2, 6, d_model, gen=gen)
    perm = torch.randperm(6, generator=gen)
    while bool((perm == torch.arange(6)).all()):
        perm = torch.randperm(6, generator=gen)
    out = run(m, f"SwiGLU({d_model}, {d_ff})(x (2, 6, {d_model}))", d_model, d_ff, x)
    check_tensor(out, what=f"SwiGLU({d_model}, {d_ff})(x (2, 6, {d_model}))", shape=x.shape, dtype=x.dtype,
                 hint="SwiGLU maps (..., d_model) to (..., d_model)")
    assert_close(m(x[:, perm]), out[:, perm], what=Phrase("SwiGLU(x[:, {perm_tolist}]) vs SwiGLU(x)[:, perm]",
                                                          perm_tolist=perm.tolist()),
                 hint="every layer acts on the last dimension only; nothing mixes positions")
