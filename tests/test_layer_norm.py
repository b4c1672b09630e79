"""layer_norm: `LayerNorm` in norms.py.

Expected values come from PyTorch's `nn.LayerNorm(d_model, eps=eps)` carrying the same
injected (non-default) weight and bias, computed in float64.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import layer_norm as mistakes
from checklib.mistakes.general import keepdim_lost
from checklib.norms import Norm
from checklib.scratch import assert_from_scratch
from checklib.student import naming_errors
from checklib.weights import norm_state, randn
from grader.text import Phrase

NORM = Norm("LayerNorm", adapters.LayerNorm, nn.LayerNorm, ("weight", "bias"))
new_norm, torch_norm, expected_output, call = NORM.new, NORM.torch, NORM.expected, NORM.call
WHERE = "over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias, var the biased variance"


def inputs(shape: tuple[int, ...], kind: str, *, gen, dtype) -> torch.Tensor:
    """`normal`; `tiny` (std 1e-3, so eps weighs as much as the variance); `constant_rows` (some rows
    all one value, variance 0); `offset` (mean 100, std 1: where float32 done right still holds 1e-4 and
    E[x²] - E[x]² in float32 does not; float64 is compared at the same tolerance, so it is offset alike)."""
    x = randn(*shape, gen=gen, dtype=torch.float64)
    if kind == "tiny":
        x = x * 1e-3
    elif kind == "constant_rows":
        rows = x.reshape(-1, shape[-1])
        rows[::2] = rows[::2, :1]  # every other position: one value repeated
        x = rows.reshape(shape)
    elif kind == "offset":
        x = x + 100.0
    return x.to(dtype)


def test_state_dict_layout(impl):
    d = 6
    got = NORM.new_student(impl, d).state_dict()
    if set(got) != {"weight", "bias"}:
        fail(f"LayerNorm({d}).state_dict()", Phrase("expected exactly the keys ['bias', 'weight'], got {sorted_got}",
                                                    sorted_got=sorted(got)),
             hint="create weight and bias as nn.Parameter of shape (d_model,), and no other parameters or buffers",
             actual=set(got), mistakes=mistakes.norm_state_mistakes(set(got)))
    for name, value in (("weight", 1.0), ("bias", 0.0)):
        check_tensor(got[name], what=f"LayerNorm({d}).state_dict()['{name}']", shape=(d,), dtype=torch.float32,
                     hint=Phrase('{name} is a float32 nn.Parameter of shape (d_model,)', name=name))
        assert_equal(got[name], torch.full((d,), value), what=Phrase("the initial {name} of LayerNorm({d})",
                                                                     name=name, d=d),
                     hint="weight starts at ones and bias at zeros, as in nn.LayerNorm",
                     mistakes=mistakes.initial_value_mistakes(d, name))


# (shape, dtype, eps (None: the default, 1e-5), input kind)
CASES = [
    ((2, 5, 8), torch.float32, 1e-5, "normal"),
    ((2, 5, 8), torch.float64, 1e-5, "normal"),
    ((3, 16), torch.float64, None, "normal"),
    ((7,), torch.float32, 1e-5, "normal"),
    ((2, 3, 4, 6), torch.float64, 1e-6, "normal"),
    ((1, 1, 5), torch.float32, 1e-5, "normal"),
    ((2, 4, 12), torch.float32, 0.5, "normal"),
    ((4, 10), torch.float64, 1.0, "normal"),
    ((3, 6, 8), torch.float32, None, "tiny"),
    ((3, 6, 8), torch.float64, None, "tiny"),
    ((2, 5, 6), torch.float64, 1e-3, "tiny"),
    ((4, 3, 8), torch.float32, 1e-5, "constant_rows"),
    ((4, 3, 8), torch.float64, 1e-2, "constant_rows"),
]


@pytest.mark.parametrize("shape, dtype, eps, kind", CASES,
                         ids=[f"{'x'.join(map(str, s))}-{str(d)[6:]}-eps{e if e is not None else 'default'}-{k}"
                              for s, d, e, k in CASES])
def test_matches_torch_layer_norm(impl, gen, shape, dtype, eps, kind):
    d = shape[-1]
    state = norm_state(d, gen=gen, dtype=dtype)
    x = inputs(shape, kind, gen=gen, dtype=dtype)
    m = new_norm(impl, d, state, eps)
    used = 1e-5 if eps is None else eps
    what = Phrase('{call_d_eps_x} vs nn.LayerNorm with the same weights', call_d_eps_x=call(d, eps, x))
    with naming_errors(what, mistakes.LAYER_NORM_WITHOUT_KEEPDIM,
                       lambda exc: keepdim_lost(exc.message, x.shape)):
        got = m(x)
    assert_close(got, expected_output(state, x, used), what=what,
                 hint=WHERE + ("; the default eps is 1e-5" if eps is None else ""),
                 mistakes=mistakes.layer_norm_mistakes(x, state, used, default_eps=eps is None, got=got))


OFFSET_CASES = [((4, 6, 16), torch.float32), ((3, 32), torch.float32), ((4, 6, 16), torch.float64)]


@pytest.mark.parametrize("shape, dtype", OFFSET_CASES, ids=[f"{'x'.join(map(str, s))}-{str(d)[6:]}" for s, d in OFFSET_CASES])
def test_large_offset_inputs(impl, gen, shape, dtype):
    """Inputs far from zero: a missing mean, or a variance computed as E[x²] - E[x]², shows here."""
    d = shape[-1]
    state = norm_state(d, gen=gen, dtype=dtype)
    x = inputs(shape, "offset", gen=gen, dtype=dtype)
    m = new_norm(impl, d, state, 1e-5)
    # float32 holds 100 + noise to about 1e-5, which a correct LayerNorm computed in float32 carries into its output
    got = m(x)
    assert_close(got, expected_output(state, x, 1e-5), atol=1e-4,
                 what=Phrase("{call_d_1e_05_x} with inputs around {x_mean_item} vs nn.LayerNorm",
                             call_d_1e_05_x=call(d, 1e-5, x), x_mean_item=format(x.mean().item(), '.0f')),
                 hint="subtract the mean first, then average the squared deviations (x - mean)**2: "
                      "E[x²] - E[x]² loses every digit of float32 when x is far from zero",
                 mistakes=mistakes.layer_norm_mistakes(x, state, 1e-5, got=got))


@pytest.mark.parametrize("shape", [(2, 5, 8), (3, 6)], ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_torch(impl, gen, shape):
    d, eps = shape[-1], 1e-5
    state = norm_state(d, gen=gen, dtype=torch.float64)
    x = randn(*shape, gen=gen, dtype=torch.float64)
    g = randn(*shape, gen=gen, dtype=torch.float64)
    m = new_norm(impl, d, state, eps)
    grads = m.grad(x, grad_output=g)
    layer = torch_norm(state, d, eps)
    x_ref = x.clone().requires_grad_(True)
    (layer(x_ref) * g).sum().backward()
    what = Phrase('gradient of {call_d_eps_x}', call_d_eps_x=call(d, eps, x))
    assert_close(grads["args"][0], x_ref.grad, what=Phrase("{what} w.r.t. x vs nn.LayerNorm's", what=what),
                 hint="compute the output from x with differentiable tensor operations: the mean and the variance "
                      "depend on x, and the gradient flows through them too",
                 mistakes=mistakes.detached_statistics_mistakes(x, state, eps, g))
    for name, param in (("weight", layer.weight), ("bias", layer.bias)):
        got = grads["params"].get(name)
        if got is None:
            fail(Phrase("gradient of {call} w.r.t. {name}", call=call(d, eps, x), name=name), "no gradient reached it",
                 hint=Phrase("{name} must be an nn.Parameter used in forward, with no .detach() or torch.no_grad()",
                             name=name))
        assert_close(got, param.grad, what=Phrase("{what} w.r.t. {name} vs nn.LayerNorm's", what=what, name=name), hint=WHERE)


def test_does_not_modify_input(impl, gen):
    d = 8
    state = norm_state(d, gen=gen)
    x = randn(2, 5, d, gen=gen)
    m = new_norm(impl, d, state, 1e-5)
    _, (after,) = m.call_returning_args(x.clone())
    assert_equal(after, x, what=Phrase('x after {call_d_1e_05_x}', call_d_1e_05_x=call(d, 1e-5, x)),
                 hint="forward must not change its input: write x - mean, not x -= mean",
                 mistakes=mistakes.centred_in_place_mistakes(x))


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for layer_norm)."""
    assert_from_scratch(target_folder, "layer_norm")
