"""cross_entropy: `softmax`, `log_softmax` and `cross_entropy` in training.py."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, diagnosed, explained, fail
from checklib.mistakes import cross_entropy as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error, naming_errors
from checklib.tolerance import ATOL, RTOL
from checklib.weights import randn
from grader.results import CheckFailure
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

DTYPES = [torch.float32, torch.float64]
# (shape, dim): 1-D to 3-D, the last dimension and others (a dim ignored shows), a square case
# (x.max(dim).values without keepdim broadcasts there instead of failing).
CASES = [((4, 4), -1), ((7,), -1), ((3, 7), -1), ((3, 7), 0), ((2, 3, 5), 1), ((2, 3, 5), -1)]
STABLE = "subtract each row's maximum (x.amax(dim, keepdim=True)) before exp: softmax(x) = softmax(x - max)"


def case_id(case) -> str:
    shape, dim = case
    return "x".join(map(str, shape)) + f"-dim{dim}"


def huge(*shape: int, gen: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """Scores as large as ±1e4, each row with its own offset, and close values near its maximum."""
    rows = randn(*shape, gen=gen, dtype=torch.float64, scale=3.0)
    offset = (torch.rand(*shape[:-1], 1, generator=gen, dtype=torch.float64) * 2 - 1) * 1e4
    return (rows + offset).clamp(-1e4, 1e4).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_softmax_matches_torch(impl, gen, case, dtype):
    shape, dim = case
    x = randn(*shape, gen=gen, dtype=dtype, scale=3.0)
    what = f"softmax(x {tuple(shape)}, dim={dim}) ({dtype})"
    out = adapters.softmax(impl)(x, dim)
    check_tensor(out, what=what, shape=shape, dtype=dtype, hint="softmax keeps the input's shape and dtype")
    assert_close(out, torch.softmax(x.double(), dim).to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint=Phrase("exp(x) / sum(exp(x)) along dim={dim}; {STABLE}", dim=dim, STABLE=STABLE), mistakes=mistakes.softmax_mistakes(x, dim, out))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_log_softmax_matches_torch(impl, gen, case, dtype):
    shape, dim = case
    x = randn(*shape, gen=gen, dtype=dtype, scale=3.0)
    what = f"log_softmax(x {tuple(shape)}, dim={dim}) ({dtype})"
    out = adapters.log_softmax(impl)(x, dim)
    check_tensor(out, what=what, shape=shape, dtype=dtype, hint="log_softmax keeps the input's shape and dtype")
    assert_close(out, torch.log_softmax(x.double(), dim).to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint="x - max - log(sum(exp(x - max))) along dim", mistakes=mistakes.log_softmax_mistakes(x, dim, out))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_large_scores_stay_finite(impl, gen, name, dtype):
    """Scores up to ±1e4: exp overflows unless the maximum is subtracted, and log(softmax) underflows."""
    x = huge(4, 9, gen=gen, dtype=dtype)
    x[0, :3] = 1e4  # a row whose maximum is reached three times
    x[1] = torch.linspace(-1e4, 1e4, 9, dtype=torch.float64).to(dtype)  # one row spanning the whole range
    what = Phrase('{name}(x (4, 9) with scores up to ±1e4, dim=-1) ({dtype})', name=name, dtype=dtype)
    out = getattr(adapters, name)(impl)(x, -1)
    check_tensor(out, what=what, shape=x.shape, dtype=dtype)
    expected = getattr(torch, name)(x.double(), -1).to(dtype)
    model = mistakes.softmax_mistakes(x, -1, out) if name == "softmax" else mistakes.log_softmax_mistakes(x, -1, out)
    assert_close(out, expected, what=what, rtol=RTOL, atol=ATOL, mistakes=model,
                 hint=STABLE if name == "softmax" else
                 "log(softmax(x)) is -inf where the softmax underflows: compute x - max - log(sum(exp(x - max)))")


# (logits shape, V): one position, a batch of positions, (B, T, V) as a language model gives.
CE_CASES = [(), (6,), (2, 5)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("lead", CE_CASES, ids=lambda lead: "lead" + ("x".join(map(str, lead)) or "0"))
def test_cross_entropy_matches_torch(impl, gen, lead, dtype):
    vocab = 7
    logits = randn(*lead, vocab, gen=gen, dtype=dtype, scale=2.0)
    targets = torch.randint(0, vocab, lead, generator=gen)
    what = Phrase("cross_entropy(logits {tuple_logits_shape}, targets {tuple_targets_shape}) ({dtype})",
                  tuple_logits_shape=tuple(logits.shape), tuple_targets_shape=tuple(targets.shape), dtype=dtype)
    out = adapters.cross_entropy(impl)(logits, targets)
    expected = F.cross_entropy(logits.double().reshape(-1, vocab), targets.reshape(-1)).to(dtype)
    check_tensor(out, what=what, shape=(), dtype=dtype,
                 hint="the loss is a 0-dim tensor in the logits' dtype (the mean, not a Python float: no .item())",
                 mistakes=mistakes.python_number_mistakes(out, expected))
    assert_close(out, expected, what=what, rtol=RTOL, atol=ATOL,
                 hint="the mean over the positions of -log_softmax(logits)[target]",
                 mistakes=mistakes.cross_entropy_mistakes(logits, targets, -100))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ignore_index", [-100, 0, 3])
def test_cross_entropy_ignore_index(impl, gen, ignore_index, dtype):
    """Ignored positions count neither in the sum nor in the number the mean divides by."""
    vocab = 6
    logits = randn(3, 8, vocab, gen=gen, dtype=dtype, scale=2.0)
    targets = torch.randint(0, vocab, (3, 8), generator=gen)
    targets[0, :5] = ignore_index
    targets[2, -2:] = ignore_index
    kwargs = {} if ignore_index == -100 else {"ignore_index": ignore_index}
    what = Phrase("cross_entropy(logits (3, 8, 6), targets{ignore_index_d_ignore_index_if_kwargs_else}) with "
                  "{int_targets_ignore_index_sum} of 24 targets ignored ({dtype})",
                  ignore_index_d_ignore_index_if_kwargs_else=', ignore_index=%d' % ignore_index if kwargs else '',
                  int_targets_ignore_index_sum=int((targets == ignore_index).sum()), dtype=dtype)
    expected = F.cross_entropy(logits.double().reshape(-1, vocab), targets.reshape(-1), ignore_index=ignore_index)
    try:
        # code that drops -100 whatever ignore_index says never indexes with it: gathering it rules that out
        with naming_errors(what, mistakes.CE_GATHERED_IGNORED,
                           lambda exc: "out of bounds" in exc.message and str(ignore_index) in exc.message,
                           ruling_out=(mistakes.CE_IGNORES_MINUS_100,)):
            out = adapters.cross_entropy(impl)(logits, targets, **kwargs)
        check_tensor(out, what=what, shape=(), dtype=dtype, mistakes=mistakes.python_number_mistakes(out, expected))
        assert_close(out, expected.to(dtype), what=what, rtol=RTOL, atol=ATOL,
                     hint="drop the positions whose target equals ignore_index (the argument, -100 by default), "
                          "then average over the positions that are left",
                     mistakes=mistakes.cross_entropy_mistakes(logits, targets, ignore_index))
    except (CheckFailure, StudentError) as failure:  # by default only: is it the default that is wrong?
        if kwargs or not right_when_given(impl, logits, targets, expected.to(dtype)):
            raise
        if isinstance(failure, CheckFailure):
            raise explained(failure, mistakes.CE_DEFAULT_IGNORE_INDEX) from None
        raise diagnosed(Phrase("{what}: {problem}", what=what, problem=failure.describe()), mistakes.CE_DEFAULT_IGNORE_INDEX) from None


def right_when_given(impl, logits: torch.Tensor, targets: torch.Tensor, expected: torch.Tensor) -> bool:
    """Whether cross_entropy(logits, targets, ignore_index=-100), the default given explicitly, is right."""
    try:
        out = adapters.cross_entropy(impl)(logits, targets, ignore_index=-100)
    except StudentError:
        return False
    return isinstance(out, torch.Tensor) and out.shape == () and out.dtype == expected.dtype and bool(
        torch.isclose(out, expected, rtol=RTOL, atol=ATOL))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_large_logits(impl, gen, dtype):
    logits = huge(2, 4, 9, gen=gen, dtype=dtype)
    targets = torch.randint(0, 9, (2, 4), generator=gen)
    what = Phrase('cross_entropy(logits (2, 4, 9) up to ±1e4, targets) ({dtype})', dtype=dtype)
    out = adapters.cross_entropy(impl)(logits, targets)
    expected = F.cross_entropy(logits.double().reshape(-1, 9), targets.reshape(-1)).to(dtype)
    check_tensor(out, what=what, shape=(), dtype=dtype, mistakes=mistakes.python_number_mistakes(out, expected))
    assert_close(out, expected, what=what, rtol=RTOL, atol=ATOL, hint=STABLE,
                 mistakes=mistakes.cross_entropy_mistakes(logits, targets, -100))


@pytest.mark.parametrize("dtype", DTYPES)
def test_cross_entropy_gradient_matches_torch(impl, gen, dtype):
    """The loss trains a model only if it backpropagates: d loss / d logits = (softmax - one_hot) / N."""
    logits = randn(2, 3, 5, gen=gen, dtype=dtype, scale=2.0)
    targets = torch.randint(0, 5, (2, 3), generator=gen)
    targets[1, 1] = -100
    got = adapters.cross_entropy(impl).grad(logits, targets, grad_output=torch.tensor(1.0, dtype=dtype))["args"][0]
    reference = logits.double().clone().requires_grad_(True)
    F.cross_entropy(reference.reshape(-1, 5), targets.reshape(-1)).backward()
    what = Phrase("the gradient of cross_entropy(logits (2, 3, 5), targets) with respect to the logits ({dtype})",
                  dtype=dtype)
    if got is None:
        fail(what, "no gradient reached the logits", hint="compute the loss with tensor operations on the logits; "
             ".item(), .detach(), .data or torch.no_grad() cut the graph")
    assert_close(got, reference.grad.to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint="(softmax(logits) - one_hot(target)) / N at the kept positions, 0 at the ignored ones")


# Flattened targets (6,) and (3, 2) hold as many entries as there are positions, in the wrong shape.
@pytest.mark.parametrize("bad", [(2, 4), (6,), (3, 2), (2, 3, 1)], ids=lambda s: "targets" + "x".join(map(str, s)))
def test_cross_entropy_rejects_mismatched_shapes(impl, gen, bad):
    logits = randn(2, 3, 5, gen=gen)
    targets = torch.randint(0, 5, bad, generator=gen)
    message = expect_value_error(adapters.cross_entropy(impl), logits, targets,
                                 what=Phrase("cross_entropy(logits (2, 3, 5), targets {tuple_bad})",
                                             tuple_bad=tuple(bad)))
    assert message, "the ValueError should say what is wrong (targets must have the shape of logits[..., 0])"


def test_does_not_modify_inputs(impl, gen):
    x = randn(3, 6, gen=gen, scale=3.0)
    for name in ("softmax", "log_softmax"):
        _, (after, _dim) = getattr(adapters, name)(impl).call_returning_args(x, -1)
        assert_equal(after, x, what=Phrase("x after {name}(x, -1)", name=name), hint="functions must not modify their inputs in place",
                     mistakes=mistakes.subtracted_in_place_mistakes(x))
    logits, targets = randn(4, 6, gen=gen, scale=3.0), torch.tensor([0, 5, -100, 2])
    _, (logits_after, targets_after) = adapters.cross_entropy(impl).call_returning_args(logits, targets)
    assert_equal(logits_after, logits, what="logits after cross_entropy(logits, targets)",
                 hint="functions must not modify their inputs in place",
                 mistakes=mistakes.subtracted_in_place_mistakes(logits))
    assert_equal(targets_after, targets, what="targets after cross_entropy(logits, targets)",
                 hint="functions must not modify their inputs in place (select the kept positions with a mask)")


def test_from_scratch(target_folder):
    """No library softmax, log_softmax, logsumexp or cross-entropy (course.yml lists them)."""
    assert_from_scratch(target_folder, "cross_entropy")
