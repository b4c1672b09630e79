"""rms_norm: `RMSNorm` in norms.py.

Expected values come from PyTorch's `nn.RMSNorm(d_model, eps=eps)` carrying the same
injected (non-default) weight, computed in float64.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import rms_norm as mistakes
from checklib.mistakes.general import keepdim_lost
from checklib.mistakes.layer_norm import detached_statistics_mistakes, initial_value_mistakes
from checklib.norms import Norm
from checklib.scratch import assert_from_scratch
from checklib.student import naming_errors
from checklib.weights import norm_state, randn
from grader.text import Phrase

NORM = Norm("RMSNorm", adapters.RMSNorm, nn.RMSNorm, ("weight",))
new_norm, torch_norm, expected_output, call = NORM.new, NORM.torch, NORM.expected, NORM.call
WHERE = "over the last dimension: x / sqrt(mean(x**2) + eps) * weight, with no mean subtracted"


def inputs(shape: tuple[int, ...], kind: str, *, gen, dtype) -> torch.Tensor:
    """`normal`; `tiny` (std 1e-3, so eps weighs as much as the mean square); `zero_rows` (some
    positions all zeros); `offset` (mean 10, std 1: far from zero, where the mean matters)."""
    x = randn(*shape, gen=gen, dtype=torch.float64)
    if kind == "tiny":
        x = x * 1e-3
    elif kind == "zero_rows":
        rows = x.reshape(-1, shape[-1])
        rows[::2] = 0.0
        x = rows.reshape(shape)
    elif kind == "offset":
        x = x + 10.0
    return x.to(dtype)


def test_state_dict_layout(impl):
    d = 6
    got = NORM.new_student(impl, d).state_dict()
    if set(got) != {"weight"}:
        fail(f"RMSNorm({d}).state_dict()", Phrase("expected exactly the key ['weight'], got {sorted_got}",
                                                  sorted_got=sorted(got)),
             hint="create weight as an nn.Parameter of shape (d_model,), and no other parameters or buffers",
             actual=set(got), mistakes=mistakes.norm_state_mistakes(set(got)))
    check_tensor(got["weight"], what=f"RMSNorm({d}).state_dict()['weight']", shape=(d,), dtype=torch.float32,
                 hint="weight is a float32 nn.Parameter of shape (d_model,)")
    assert_equal(got["weight"], torch.ones(d), what=Phrase('the initial weight of RMSNorm({d})', d=d),
                 hint="weight starts at ones, as in nn.RMSNorm", mistakes=initial_value_mistakes(d, "weight"))


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
    ((4, 3, 8), torch.float32, 1e-5, "zero_rows"),
    ((4, 3, 8), torch.float64, 1e-2, "zero_rows"),
]


@pytest.mark.parametrize("shape, dtype, eps, kind", CASES,
                         ids=[f"{'x'.join(map(str, s))}-{str(d)[6:]}-eps{e if e is not None else 'default'}-{k}"
                              for s, d, e, k in CASES])
def test_matches_torch_rms_norm(impl, gen, shape, dtype, eps, kind):
    d = shape[-1]
    state = norm_state(d, gen=gen, dtype=dtype, bias=False)
    x = inputs(shape, kind, gen=gen, dtype=dtype)
    m = new_norm(impl, d, state, eps)
    used = 1e-5 if eps is None else eps
    what = Phrase('{call_d_eps_x} vs nn.RMSNorm with the same weight', call_d_eps_x=call(d, eps, x))
    with naming_errors(what, mistakes.RMS_WITHOUT_KEEPDIM, lambda exc: keepdim_lost(exc.message, x.shape)):
        got = m(x)
    assert_close(got, expected_output(state, x, used), what=what,
                 hint=WHERE + ("; the default eps is 1e-5" if eps is None else ""),
                 mistakes=mistakes.rms_norm_mistakes(x, state, used, default_eps=eps is None, got=got))


OFFSET_CASES = [((4, 6, 16), torch.float32), ((3, 32), torch.float64)]


@pytest.mark.parametrize("shape, dtype", OFFSET_CASES, ids=[f"{'x'.join(map(str, s))}-{str(d)[6:]}" for s, d in OFFSET_CASES])
def test_large_offset_inputs(impl, gen, shape, dtype):
    """Inputs far from zero, where subtracting the mean (LayerNorm's habit) changes everything."""
    d = shape[-1]
    state = norm_state(d, gen=gen, dtype=dtype, bias=False)
    x = inputs(shape, "offset", gen=gen, dtype=dtype)
    m = new_norm(impl, d, state, 1e-5)
    got = m(x)
    assert_close(got, expected_output(state, x, 1e-5),
                 what=Phrase("{call_d_1e_05_x} with inputs around {x_mean_item} vs nn.RMSNorm",
                             call_d_1e_05_x=call(d, 1e-5, x), x_mean_item=format(x.mean().item(), '.0f')),
                 hint="RMSNorm does not centre x: divide x itself by the root of mean(x**2) + eps",
                 mistakes=mistakes.rms_norm_mistakes(x, state, 1e-5, got=got))


@pytest.mark.parametrize("shape", [(2, 5, 8), (3, 6)], ids=lambda s: "x".join(map(str, s)))
def test_gradients_match_torch(impl, gen, shape):
    d, eps = shape[-1], 1e-5
    state = norm_state(d, gen=gen, dtype=torch.float64, bias=False)
    x = randn(*shape, gen=gen, dtype=torch.float64)
    g = randn(*shape, gen=gen, dtype=torch.float64)
    m = new_norm(impl, d, state, eps)
    grads = m.grad(x, grad_output=g)
    layer = torch_norm(state, d, eps)
    x_ref = x.clone().requires_grad_(True)
    (layer(x_ref) * g).sum().backward()
    what = Phrase('gradient of {call_d_eps_x}', call_d_eps_x=call(d, eps, x))
    assert_close(grads["args"][0], x_ref.grad, what=Phrase("{what} w.r.t. x vs nn.RMSNorm's", what=what),
                 hint="compute the output from x with differentiable tensor operations: the mean square depends "
                      "on x, and the gradient flows through it too",
                 mistakes=detached_statistics_mistakes(x, state, eps, g, rms=True))
    got = grads["params"].get("weight")
    if got is None:
        fail(Phrase('{what} w.r.t. weight', what=what), "no gradient reached it",
             hint="weight must be an nn.Parameter used in forward, with no .detach() or torch.no_grad()")
    assert_close(got, layer.weight.grad, what=Phrase("{what} w.r.t. weight vs nn.RMSNorm's", what=what), hint=WHERE)


def test_does_not_modify_input(impl, gen):
    d = 8
    state = norm_state(d, gen=gen, bias=False)
    x = randn(2, 5, d, gen=gen)
    m = new_norm(impl, d, state, 1e-5)
    _, (after,) = m.call_returning_args(x.clone())
    assert_equal(after, x, what=Phrase('x after {call_d_1e_05_x}', call_d_1e_05_x=call(d, 1e-5, x)),
                 hint="forward must not change its input: write x * ..., not x *= ... or x.mul_(...)",
                 mistakes=mistakes.scaled_in_place_mistakes(x))


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for rms_norm)."""
    assert_from_scratch(target_folder, "rms_norm")
