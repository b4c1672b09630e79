"""optimizer: `AdamW` and `clip_grad_norm` in training.py.

The parameters live beside the student's code, in a grader tool (`Parameters`,
grader/sandbox/standins/parameters.py) that sets the gradients each check sends and hands
back the values after each step; the expected values come from running
`torch.optim.AdamW` and `torch.nn.utils.clip_grad_norm_` here on equal copies.
"""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import CheckFailure, assert_close, check_tensor, diagnose, fail, rediagnosed
from checklib.mistakes import optimizer as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error, naming_errors
from checklib.tolerance import ATOL, RTOL
from checklib.weights import randn
from grader.text import Phrase

DTYPES = [torch.float32, torch.float64]
SHAPES = [(3, 4), (4,), (2, 2, 3)]
DEFAULTS = dict(lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
# Settings in which each mistake shows: a decay large enough that its place in the update matters
# (lr * wd = 0.05), betas far apart (one used for the other shows), an eps as large as the gradients
# (where it is added shows), and the defaults.
SETTINGS = {
    "typical": (dict(lr=1e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1), 1.0),
    "strong_decay": (dict(lr=0.1, betas=(0.8, 0.9), eps=1e-8, weight_decay=0.5), 1.0),
    "large_eps": (dict(lr=3e-2, betas=(0.5, 0.99), eps=1e-3, weight_decay=0.0), 1e-2),
    "defaults": ({}, 1.0),
}
WHERE = ("p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g²; "
         "p -= lr * (m / (1 - b1**t)) / (sqrt(v / (1 - b2**t)) + eps), t counting this parameter's own steps")


def start(gen, dtype, shapes=SHAPES) -> list[torch.Tensor]:
    return [randn(*s, gen=gen, dtype=dtype) for s in shapes]


def gradients(gen, dtype, steps: int, scale: float, shapes=SHAPES, absent=()) -> list[list[torch.Tensor | None]]:
    """steps x parameters gradients; (step, index) in `absent` gets None (no gradient that step)."""
    return [[None if (s, i) in absent else randn(*shape, gen=gen, dtype=dtype, scale=scale)
             for i, shape in enumerate(shapes)] for s in range(steps)]


def run(impl, values, grads, *, kwargs=None, groups=None, lr_steps=None):
    """Each step's parameters under the student's AdamW and under torch.optim.AdamW.

    `groups`: [(parameter indices, settings)], else one group; `lr_steps[s][g]`: group g's lr at step s,
    set in its param group before the step (as a schedule does). Returns (got, expected), each steps x
    parameters, and the per-parameter settings and lrs the mistake models need.
    """
    kwargs = kwargs or {}
    groups = groups or [(list(range(len(values))), {})]
    params = impl.new_trusted("Parameters", values)
    mine = [torch.nn.Parameter(v.clone()) for v in values]
    if len(groups) == 1 and not groups[0][1]:
        optimizer = adapters.AdamW(impl, params.ref, **kwargs)
        reference = torch.optim.AdamW(mine, **{**DEFAULTS, **kwargs}, foreach=False)
    else:
        spec = [{"params": params.method("group", *idx).ref, **settings} for idx, settings in groups]
        optimizer = adapters.AdamW(impl, spec, **kwargs)
        reference = torch.optim.AdamW([{"params": [mine[i] for i in idx], **settings} for idx, settings in groups],
                                      **{**DEFAULTS, **kwargs}, foreach=False)
    per_param = [None] * len(values)
    for g, (idx, settings) in enumerate(groups):
        for i in idx:
            per_param[i] = {**DEFAULTS, **kwargs, **settings}
    lrs, got, expected = [], [], []
    for s, step_grads in enumerate(grads):
        if lr_steps is not None:
            for g, lr in enumerate(lr_steps[s]):
                params.method("set_group", optimizer, g, {"lr": lr})
                reference.param_groups[g]["lr"] = lr
        lrs.append([reference.param_groups[next(g for g, (idx, _) in enumerate(groups) if i in idx)]["lr"]
                    for i in range(len(values))])
        with naming_errors("AdamW's first step", mistakes.STEP_FROM_ZERO,
                           lambda exc: s == 0 and "ZeroDivisionError" in exc.kinds):
            params.method("step", optimizer, step_grads)
        got.append(params.method("values"))
        for p, gr in zip(mine, step_grads):
            p.grad = None if gr is None else gr.clone()
        reference.step()
        expected.append([p.detach().clone() for p in mine])
    return got, expected, per_param, lrs


def compare_steps(got, expected, values, grads, per_param, lrs, what: str) -> None:
    """Fail at the first step and parameter that differ; where every step gave tensors of the right shapes
    and dtypes, the diagnosis weighs the whole run, not that one step."""
    whole = all(isinstance(out, torch.Tensor) and out.shape == ref.shape and out.dtype == ref.dtype
                for got_step, expected_step in zip(got, expected) for out, ref in zip(got_step, expected_step))
    for s, (got_step, expected_step) in enumerate(zip(got, expected)):
        for i, (out, ref) in enumerate(zip(got_step, expected_step)):
            where = Phrase("{what}: parameter {i} {tuple_ref_shape} after step {s_1}", what=what, i=i,
                           tuple_ref_shape=tuple(ref.shape), s_1=s + 1)
            if not whole:
                assert_close(out, ref, what=where, rtol=RTOL, atol=ATOL, hint=WHERE,
                             mistakes=mistakes.adamw_mistakes(values, grads, per_param, lrs, s, i, out))
                continue
            try:
                assert_close(out, ref, what=where, rtol=RTOL, atol=ATOL, hint=WHERE)
            except CheckFailure as failure:
                run = mistakes.flat_run(got)
                raise rediagnosed(failure, diagnose(
                    run, mistakes.adamw_run_mistakes(values, grads, per_param, lrs, run),
                    expected=mistakes.flat_run(expected), rtol=RTOL, atol=ATOL)) from None


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", list(SETTINGS))
def test_adamw_matches_torch(impl, gen, name, dtype):
    kwargs, scale = SETTINGS[name]
    values = start(gen, dtype)
    grads = gradients(gen, dtype, 5, scale)
    got, expected, per_param, lrs = run(impl, values, grads, kwargs=kwargs)
    args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    compare_steps(got, expected, values, grads, per_param, lrs, f"AdamW(params{', ' + args if args else ''}) ({dtype})")


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_reads_lr_at_every_step(impl, gen, dtype):
    """A schedule sets param_groups[0]['lr'] between steps; lr 0 leaves the parameters where they are."""
    lr_steps = [[1e-2], [5e-2], [0.0], [2e-2], [1e-1]]
    kwargs = dict(lr=1e-2, betas=(0.9, 0.99), weight_decay=0.2)
    values = start(gen, dtype)
    grads = gradients(gen, dtype, len(lr_steps), 1.0)
    got, expected, per_param, lrs = run(impl, values, grads, kwargs=kwargs, lr_steps=lr_steps)
    compare_steps(got, expected, values, grads, per_param, lrs,
                  Phrase("AdamW with lr changed before each step to {lr_0_for_lr_in_lr_steps} ({dtype})",
                         lr_0_for_lr_in_lr_steps=[lr[0] for lr in lr_steps], dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_counts_steps_per_parameter(impl, gen, dtype):
    """Parameter 1 has no gradient for three steps, parameter 2 every other step: each has its own t,
    and a parameter without a gradient is left alone (no decay either)."""
    absent = {(0, 1), (1, 1), (2, 1), (1, 2), (3, 2)}
    kwargs = dict(lr=5e-2, betas=(0.8, 0.99), weight_decay=0.3)
    values = start(gen, dtype)
    grads = gradients(gen, dtype, 6, 1.0, absent=absent)
    got, expected, per_param, lrs = run(impl, values, grads, kwargs=kwargs)
    compare_steps(got, expected, values, grads, per_param, lrs,
                  Phrase("AdamW where parameter 1 has no gradient in steps 1-3 and parameter 2 none in steps 2 and "
                         "4 ({dtype})", dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_param_groups(impl, gen, dtype):
    """Each param group's own settings; what a group leaves out comes from the constructor's arguments."""
    groups = [([0, 2], dict(lr=2e-2, weight_decay=0.3)), ([1], dict(betas=(0.5, 0.9), eps=1e-3))]
    kwargs = dict(lr=5e-2, weight_decay=0.0)
    values = start(gen, dtype)
    grads = gradients(gen, dtype, 4, 1.0)
    got, expected, per_param, lrs = run(impl, values, grads, kwargs=kwargs, groups=groups)
    compare_steps(got, expected, values, grads, per_param, lrs,
                  f"AdamW([{{params 0, 2, lr=2e-2, weight_decay=0.3}}, {{params 1, betas=(0.5, 0.9), eps=1e-3}}], "
                  f"lr=5e-2, weight_decay=0) ({dtype})")


def test_adamw_param_group_defaults(impl, gen):
    params = impl.new_trusted("Parameters", start(gen, torch.float32))
    optimizer = adapters.AdamW(impl, params.ref)
    groups = optimizer.attr("param_groups")
    if not isinstance(groups, list) or not groups or not isinstance(groups[0], dict):
        fail("AdamW(params).param_groups", Phrase("expected a list of dicts, got {groups}",
                                                  groups=format(repr(groups), '.80')),
             hint="subclass torch.optim.Optimizer and pass the settings to super().__init__(params, defaults)")
    group = groups[0]
    for key, value in DEFAULTS.items():
        got = group.get(key)
        got = tuple(got) if isinstance(got, list) else got
        if got != value:
            fail(f"AdamW(params).param_groups[0][{key!r}]", Phrase("expected the default {value}, got {got}",
                                                                   value=repr(value), got=repr(got)),
                 hint="the contract's defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01; "
                      "pass them to super().__init__ in the defaults dict so each group gets them")


@pytest.mark.parametrize("dtype", DTYPES)
def test_adamw_step_with_a_closure(impl, gen, dtype):
    """step(closure) calls the closure once, steps with the gradients it set and returns its loss; step()
    returns None."""
    values = start(gen, dtype)
    grads = gradients(gen, dtype, 2, 1.0)
    params = impl.new_trusted("Parameters", values)
    optimizer = adapters.AdamW(impl, params.ref, lr=5e-2)
    mine = [torch.nn.Parameter(v.clone()) for v in values]
    reference = torch.optim.AdamW(mine, lr=5e-2, foreach=False)
    returned, calls = params.method("step", optimizer, grads[0], 1.5)
    if calls != 1:
        fail("AdamW.step(closure)", Phrase('the closure ran {calls} times, expected once', calls=calls),
             hint="call the closure (under torch.enable_grad()) once, before updating, and keep what it returns",
             actual=calls, mistakes=mistakes.closure_mistakes())
    if not (isinstance(returned, torch.Tensor) and returned.numel() == 1 and float(returned) == 1.5):
        fail("AdamW.step(closure)", Phrase("expected the closure's loss tensor(1.5) back, got {returned}",
                                           returned=format(repr(returned), '.80')),
             hint="step returns the loss the closure returned")
    for p, g in zip(mine, grads[0]):
        p.grad = g.clone()
    reference.step()
    for i, (out, ref) in enumerate(zip(params.method("values"), mine)):
        assert_close(out, ref.detach(), what=Phrase("parameter {i} after step(closure), the closure setting the "
                                                    "gradients", i=i),
                     rtol=RTOL, atol=ATOL, hint="call the closure first: it computes the gradients of this step")
    returned, _ = params.method("step", optimizer, grads[1])
    if returned is not None:
        fail("AdamW.step()", Phrase("expected None without a closure, got {returned}",
                                    returned=format(repr(returned), '.80')),
             hint="without a closure there is no loss to return")


@pytest.mark.parametrize("kwargs", [dict(lr=-1e-3), dict(eps=-1e-8), dict(weight_decay=-0.1),
                                    dict(betas=(1.0, 0.999)), dict(betas=(0.9, 1.0)), dict(betas=(-0.1, 0.999))],
                         ids=lambda kw: ",".join(f"{k}={v}" for k, v in kw.items()))
def test_adamw_rejects_bad_hyperparameters(impl, gen, kwargs):
    params = impl.new_trusted("Parameters", start(gen, torch.float32))
    args = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    message = expect_value_error(lambda: adapters.AdamW(impl, params.ref, **kwargs), what=f"AdamW(params, {args})")
    assert message, "the ValueError should name the bad setting"


def clip(impl, values, grads, max_norm, *, as_generator=False):
    """(returned norm, gradients after) of the student's clip_grad_norm, and torch's on equal copies."""
    params = impl.new_trusted("Parameters", values)
    params.method("set_grads", grads)
    argument = params.method("generator").ref if as_generator else params.ref
    norm = adapters.clip_grad_norm(impl)(argument, max_norm)
    after = params.method("grads")
    mine = [torch.nn.Parameter(v.clone()) for v in values]
    for p, g in zip(mine, grads):
        p.grad = None if g is None else g.clone()
    expected_norm = torch.nn.utils.clip_grad_norm_(mine, max_norm)
    return norm, after, expected_norm, [p.grad for p in mine]


def compare_clip(norm, after, expected_norm, expected, grads, max_norm, what: str) -> None:
    present = [g for g in grads if g is not None]
    dtype = present[0].dtype
    check_tensor(norm, what=Phrase('the norm {what} returns', what=what), shape=(), dtype=dtype,
                 hint="return the total norm as a 0-dim tensor in the gradients' dtype")
    # atol 0: gradients as small as 1e-6 must be compared by their relative error
    assert_close(norm, expected_norm, what=Phrase('the norm {what} returns', what=what), rtol=RTOL, atol=0.0,
                 hint="the L2 norm of all the gradients together, as one vector, before clipping",
                 mistakes=mistakes.clip_norm_mistakes(present, max_norm))
    for i, (out, ref) in enumerate(zip(after, expected)):
        if ref is None:
            if out is not None:
                fail(Phrase("parameter {i}'s .grad after {what}", i=i, what=what), "expected None (it had no gradient), got a tensor",
                     hint="parameters without a gradient are skipped")
            continue
        k = sum(1 for g in grads[:i] if g is not None)
        assert_close(out, ref, what=Phrase("parameter {i}'s .grad after {what}", i=i, what=what), rtol=RTOL, atol=0.0,
                     hint="multiply every gradient in place by min(1, max_norm / (norm + 1e-6))",
                     mistakes=mistakes.clip_grads_mistakes(present, max_norm, k))


# (max_norm, gradient scale): clipped hard, not clipped, barely clipped, and tiny gradients where the
# 1e-6 matters.
CLIPS = [(0.5, 1.0), (100.0, 1.0), (4.0, 1.0), (1e-6, 1e-6)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("max_norm, scale", CLIPS, ids=lambda v: f"{v:g}")
def test_clip_grad_norm_matches_torch(impl, gen, max_norm, scale, dtype):
    values = start(gen, dtype)
    grads = [randn(*s, gen=gen, dtype=dtype, scale=scale) for s in SHAPES]
    result = clip(impl, values, grads, max_norm)
    compare_clip(*result, grads, max_norm, f"clip_grad_norm(parameters, max_norm={max_norm:g}) ({dtype})")


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_grad_norm_reads_a_generator_once(impl, gen, dtype):
    """model.parameters() is a generator: a second pass over it finds nothing."""
    values = start(gen, dtype)
    # the last gradient smaller: its norm is not the largest (two mistakes of the norm read the same there)
    grads = [randn(*s, gen=gen, dtype=dtype, scale=0.3 if s is SHAPES[-1] else 1.0) for s in SHAPES]
    result = clip(impl, values, grads, 0.5, as_generator=True)
    compare_clip(*result, grads, 0.5, Phrase("clip_grad_norm(a generator of parameters, max_norm=0.5) ({dtype})",
                                             dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_clip_grad_norm_skips_parameters_without_grad(impl, gen, dtype):
    values = start(gen, dtype, shapes=SHAPES + [(5,)])
    grads = [randn(3, 4, gen=gen, dtype=dtype), None, randn(2, 2, 3, gen=gen, dtype=dtype, scale=0.3), None]
    result = clip(impl, values, grads, 0.5)
    compare_clip(*result, grads, 0.5, Phrase("clip_grad_norm(parameters 1 and 3 without a gradient, max_norm=0.5) "
                                             "({dtype})", dtype=dtype))


def test_from_scratch(target_folder):
    """No library optimizer or clipping (course.yml lists them for optimizer)."""
    assert_from_scratch(target_folder, "optimizer")
