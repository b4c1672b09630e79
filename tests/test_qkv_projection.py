"""qkv_projection: `MultiHeadAttention.__init__` (its layers) and `project_qkv` in attention.py."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, check_tensor, explained, fail, shown
from checklib.mistakes import qkv_projection as mistakes
from checklib.student import expect_value_error
from checklib.weights import mha_state, randn
from grader.results import CheckFailure
from grader.text import Phrase

MHA = adapters.MultiHeadAttention
LAYERS = ("w_q", "w_k", "w_v", "out_proj")
# (d_model, n_heads): one head, one feature per head, the usual case.
SIZES = [(8, 2), (12, 3), (6, 1), (4, 4), (16, 4)]


def expected_keys(bias: bool) -> set[str]:
    return {f"{layer}.{p}" for layer in LAYERS for p in (("weight", "bias") if bias else ("weight",))}


@pytest.mark.parametrize("bias", [True, False, None], ids=["bias", "no-bias", "default"])
@pytest.mark.parametrize("d_model, n_heads", SIZES[:3])
def test_state_dict_layout(impl, d_model, n_heads, bias):
    """None: bias not passed, so the contract's default (bias=True) holds."""
    given = {} if bias is None else {"bias": bias}
    state = MHA(impl, d_model, n_heads, **given).state_dict()
    what = f"MultiHeadAttention({d_model}, {n_heads}{'' if bias is None else f', bias={bias}'}).state_dict()"
    bias = True if bias is None else bias
    keys = set(state)
    if keys != expected_keys(bias):
        missing, extra = sorted(expected_keys(bias) - keys), sorted(keys - expected_keys(bias))
        known = mistakes.state_dict_key_mistakes(expected_keys(bias), bias)
        fail(what, Phrase('wrong parameter names; missing {missing}, unexpected {extra}', missing=missing, extra=extra),
             hint="create exactly four nn.Linear(d_model, d_model, bias=bias) named w_q, w_k, w_v, out_proj "
                  "(pass bias=bias to every one; bias defaults to True)",
             actual=keys, expected=expected_keys(bias),
             mistakes={**known, **mistakes.bias_default_mistakes(expected_keys(False))} if not given else known)
    for key, tensor in state.items():
        shape = (d_model, d_model) if key.endswith("weight") else (d_model,)
        check_tensor(tensor, what=f"{what}['{key}']", shape=shape,
                     hint="every projection maps d_model features to d_model features",
                     mistakes=mistakes.qkv_width_mistakes(key, d_model, n_heads))


@pytest.mark.parametrize("d_model, n_heads", SIZES)
def test_attributes(impl, d_model, n_heads):
    m = MHA(impl, d_model, n_heads)
    for name, value in (("d_model", d_model), ("n_heads", n_heads), ("d_k", d_model // n_heads)):
        got = m.attr(name)
        if isinstance(got, bool) or not isinstance(got, int) or got != value:
            fail(f"MultiHeadAttention({d_model}, {n_heads}).{name}", Phrase("expected the int {value}, got {got}",
                                                                            value=value, got=repr(got)),
                 hint="d_k is the size of one head, d_model // n_heads (an int: it is used as a tensor size)",
                 actual=got, mistakes=mistakes.d_k_mistakes(d_model, n_heads) if name == "d_k" else None)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape", [(2, 5, 8, 2), (1, 1, 12, 3), (3, 4, 6, 1)], ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_project_qkv_values(impl, gen, shape, bias, dtype):
    batch, length, d_model, n_heads = shape
    m = MHA(impl, d_model, n_heads, bias=bias)
    if dtype == torch.float64:
        m.double()
    state = mha_state(d_model, gen=gen, dtype=dtype, bias=bias)
    m.load_weights(state)
    x = randn(batch, length, d_model, gen=gen, dtype=dtype)
    result = m.project_qkv(x)
    call = f"MultiHeadAttention({d_model}, {n_heads}, bias={bias}).project_qkv(x {tuple(x.shape)})"
    if not isinstance(result, tuple) or len(result) != 3:
        raise AssertionError(Phrase("{call}: expected a tuple (q, k, v), got {shown_result}", call=call,
                                    shown_result=shown(result)))
    for name, out in zip("qkv", result):
        layer = f"w_{name}"
        what = Phrase('{name} of {call}', name=name, call=call)
        check_tensor(out, what=what, shape=(batch, length, d_model), dtype=dtype,
                     hint="each of q, k, v is (B, T, D) in the input's dtype: project first, split heads later")
        expected = F.linear(x, state[f"{layer}.weight"], state.get(f"{layer}.bias"))
        try:
            assert_close(out, expected, what=what,
                         hint=Phrase("{name} must be {layer}(x) = x @ {layer}.weight^T", name=name, layer=layer) + (f" + {layer}.bias" if bias else "")
                              + Phrase('; check that {name} comes from its own layer {layer}', name=name, layer=layer),
                         mistakes=mistakes.projection_mistakes(x, state, name, n_heads))
        except CheckFailure as failure:  # each output right, in another order: that says more than one wrong layer
            order = mistakes.returned_order(result, {n: F.linear(x, state[f"w_{n}.weight"], state.get(f"w_{n}.bias"))
                                                     for n in "qkv"})
            if order is None:
                raise
            raise explained(failure, mistakes.QKV_ORDER.text(order=order)) from None


@pytest.mark.parametrize("d_model, n_heads", [(10, 3), (8, 3), (6, 4)])
def test_rejects_indivisible_d_model(impl, d_model, n_heads):
    def build():
        return Phrase("a {MHA_impl_d_model_n_heads_type_name} object",
                      MHA_impl_d_model_n_heads_type_name=MHA(impl, d_model, n_heads).type_name)

    message = expect_value_error(build, what=f"MultiHeadAttention({d_model}, {n_heads})")
    assert message, "the ValueError should say what is wrong (d_model is not divisible by n_heads)"
