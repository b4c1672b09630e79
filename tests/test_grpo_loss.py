"""grpo_loss: `group_advantages` and `grpo_loss` in alignment.py.

The expected values are computed here, in float64, another way than the contract writes them: each group's
statistics by a loop (the unbiased variance as a sum of squares over n - 1), and the clipped surrogate
piecewise by the sign of the advantage (min(ratio, 1 + eps) * A where A >= 0, max(ratio, 1 - eps) * A where
A < 0), each sequence's mean by a loop over its masked tokens.
"""
from __future__ import annotations

import math

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import grpo_loss as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error
from checklib.tolerance import ATOL, RTOL
from grader.text import Phrase

DTYPES = [torch.float32, torch.float64]
ADVANTAGES = ("each reward minus its group's mean, over its group's std (unbiased, torch.std's default) plus eps; "
              "the groups are consecutive: view(-1, group_size)")
LOSS = ("per token -(min(ratio * A, clamp(ratio, 1 - clip_eps, 1 + clip_eps) * A) - beta * kl), "
        "kl = exp(ref - logps) - (ref - logps) - 1; each sequence's mean over its masked tokens, then the batch mean")


def expected_advantages(rewards: torch.Tensor, group_size: int, eps: float) -> torch.Tensor:
    r = rewards.double().tolist()
    out = []
    for start in range(0, len(r), group_size):
        group = r[start:start + group_size]
        mean = sum(group) / group_size
        std = math.sqrt(sum((x - mean) ** 2 for x in group) / (group_size - 1))
        out += [(x - mean) / (std + eps) for x in group]
    return torch.tensor(out, dtype=torch.float64)


# (group_size, groups, scale, eps): several groups, pairs, one group, rewards close together (eps shows), eps given.
ADV_CASES = [(4, 3, 1.0, None), (2, 5, 1.0, None), (6, 1, 1.0, None), (4, 3, 0.01, None), (3, 4, 1.0, 0.5)]


def check_advantages(impl, rewards, group_size, eps, what, dtype):
    kwargs = {} if eps is None else {"eps": eps}
    out = adapters.group_advantages(impl)(rewards, group_size, **kwargs)
    check_tensor(out, what=what, shape=tuple(rewards.shape), dtype=dtype,
                 hint="the advantages have the shape and dtype of the rewards")
    eps = 1e-4 if eps is None else eps
    assert_close(out, expected_advantages(rewards, group_size, eps).to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint=ADVANTAGES, mistakes=mistakes.advantage_mistakes(rewards, group_size, eps))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ADV_CASES, ids=lambda c: "size{}-groups{}-scale{:g}-eps{}".format(*c))
def test_group_advantages_matches_formula(impl, gen, dtype, case):
    group_size, groups, scale, eps = case
    rewards = (torch.randn(groups * group_size, generator=gen, dtype=torch.float64) * scale
               + torch.arange(groups, dtype=torch.float64).repeat_interleave(group_size)).to(dtype)
    what = Phrase("group_advantages(rewards ({n},), group_size={group_size}{eps}) with rewards of spread {scale} "
                  "({dtype})", n=groups * group_size, group_size=group_size,
                  eps="" if eps is None else f", eps={eps}", scale=scale, dtype=dtype)
    check_advantages(impl, rewards, group_size, eps, what, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_group_advantages_equal_rewards(impl, gen, dtype):
    """A group whose answers all got the same reward teaches nothing: zeros, not NaN."""
    rewards = torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.5, 0.5, 0.5, 0.5], dtype=dtype)
    what = Phrase("group_advantages(rewards (12,), group_size=4) with groups of equal rewards ({dtype})", dtype=dtype)
    check_advantages(impl, rewards, 4, None, what, dtype)


def test_group_advantages_leaves_the_rewards_alone(impl, gen):
    rewards = torch.randn(12, generator=gen)
    _, (after, _size) = adapters.group_advantages(impl).call_returning_args(rewards, 4)
    assert_equal(after, rewards, what="rewards after group_advantages(rewards, 4)",
                 hint="functions must not modify their inputs in place: a view of the rewards shares their memory, so "
                      "compute (grouped - mean) / (std + eps) as a new tensor",
                 mistakes=mistakes.rewards_in_place_mistakes(rewards, 4, 1e-4))


@pytest.mark.parametrize("case", [(6, 1), (6, 0), (6, 4), (7, 2)], ids=lambda c: "n{}-size{}".format(*c))
def test_group_advantages_rejects_bad_group_size(impl, gen, case):
    n, group_size = case
    rewards = torch.randn(n, generator=gen)
    expect_value_error(adapters.group_advantages(impl), rewards, group_size,
                       what=Phrase("group_advantages(rewards ({n},), group_size={group_size})", n=n,
                                   group_size=group_size))


def token_case(gen: torch.Generator, dtype: torch.dtype, batch: int = 4, length: int = 6):
    """logps near old_logps (ratios from about 0.5 to 2, inside and outside the clip range), the reference a
    little off, advantages of both signs, a mask with gaps; every row has a True."""
    logps = -3 * torch.rand(batch, length, generator=gen, dtype=torch.float64) - 0.1
    old = logps + 0.7 * (2 * torch.rand(batch, length, generator=gen, dtype=torch.float64) - 1)
    ref = logps + 0.5 * torch.randn(batch, length, generator=gen, dtype=torch.float64)
    advantages = torch.tensor([1.2, -0.8, 0.5, -1.5][:batch], dtype=torch.float64)
    mask = torch.ones(batch, length, dtype=torch.bool)
    mask[0, 4:] = False
    mask[1, 1] = False
    mask[2, :2] = False
    mask[3, 3:] = False
    return tuple(t.to(dtype) for t in (logps, old, ref, advantages)) + (mask,)


def expected_grpo(logps, old, ref, advantages, mask, clip_eps, beta) -> torch.Tensor:
    logps, old, ref, advantages = (t.double() for t in (logps, old, ref, advantages))
    total = 0.0
    for b in range(logps.shape[0]):
        a, terms = float(advantages[b]), []
        for t in range(logps.shape[1]):
            if not mask[b, t]:
                continue
            ratio = math.exp(float(logps[b, t] - old[b, t]))
            surrogate = (min(ratio, 1 + clip_eps) if a >= 0 else max(ratio, 1 - clip_eps)) * a
            d = float(ref[b, t] - logps[b, t])
            terms.append(beta * (math.exp(d) - d - 1) - surrogate)
        total += sum(terms) / len(terms)
    return torch.tensor(total / logps.shape[0], dtype=torch.float64)


def check_grpo(impl, inputs, kwargs, what, dtype):
    out = adapters.grpo_loss(impl)(*inputs, **kwargs)
    check_tensor(out, what=what, shape=(), dtype=dtype, hint="the loss is a 0-dim tensor in the inputs' dtype")
    clip_eps, beta = kwargs.get("clip_eps", 0.2), kwargs.get("beta", 0.04)
    assert_close(out, expected_grpo(*inputs, clip_eps, beta).to(dtype), what=what, rtol=RTOL, atol=ATOL, hint=LOSS,
                 mistakes=mistakes.loss_mistakes(*inputs, clip_eps, beta))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("settings", [(), (("clip_eps", 0.1), ("beta", 0.2))], ids=["defaults", "given"])
def test_grpo_loss_matches_formula(impl, gen, dtype, settings):
    kwargs = dict(settings)
    inputs = token_case(gen, dtype)
    what = Phrase("grpo_loss(logps, old_logps, ref_logps (4, 6), advantages (4,), mask with gaps{given}) ({dtype})",
                  given="".join(f", {k}={v}" for k, v in kwargs.items()), dtype=dtype)
    check_grpo(impl, inputs, kwargs, what, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grpo_clipping_on_both_signs(impl, dtype):
    """beta = 0 and logps = ref_logps: ratios of 0.5, 0.9, 1.1 and 2 against advantages of +1 and -1."""
    ratios = torch.tensor([0.5, 0.9, 1.1, 2.0], dtype=torch.float64)
    old = torch.full((4, 4), -2.0, dtype=torch.float64)
    logps = old + torch.log(ratios)
    advantages = torch.tensor([1.0, -1.0, 2.0, -0.5], dtype=torch.float64)
    mask = torch.ones(4, 4, dtype=torch.bool)
    inputs = tuple(t.to(dtype) for t in (logps, old, logps, advantages)) + (mask,)
    what = Phrase("grpo_loss with ratios 0.5, 0.9, 1.1, 2 and advantages of both signs, beta=0 ({dtype})", dtype=dtype)
    check_grpo(impl, inputs, {"beta": 0.0}, what, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grpo_kl_term(impl, gen, dtype):
    """Advantages 0, so that the surrogate is 0 whatever the ratio: what is left is beta times each sequence's mean
    k3 (old_logps differs from logps and ref_logps, so that a KL against old_logps shows)."""
    logps, old, ref, _adv, mask = token_case(gen, dtype)
    inputs = (logps, old, ref, torch.zeros(4, dtype=dtype), mask)
    what = Phrase("grpo_loss with zero advantages, beta=0.5: the KL term alone ({dtype})", dtype=dtype)
    check_grpo(impl, inputs, {"beta": 0.5}, what, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_grpo_loss_gradient(impl, gen, dtype):
    """With respect to logps only (old_logps, ref_logps and the advantages are constants)."""
    inputs = token_case(gen, dtype)
    got = adapters.grpo_loss(impl).grad(*inputs, grad_output=torch.tensor(1.0, dtype=dtype))["args"][0]
    what = Phrase("the gradient of grpo_loss with respect to logps ({dtype})", dtype=dtype)
    if got is None:
        fail(what, "no gradient reached logps",
             hint="compute the loss with tensor operations on logps; .item(), .detach() or torch.no_grad() cut the graph")
    logps, old, ref, advantages, mask = inputs
    x = logps.double().clone().requires_grad_(True)
    ratio = torch.exp(x - old.double())
    a = advantages.double()[:, None]
    surrogate = torch.where(a >= 0, torch.minimum(ratio, torch.tensor(1.2, dtype=torch.float64)),
                            torch.maximum(ratio, torch.tensor(0.8, dtype=torch.float64))) * a
    d = ref.double() - x
    per_token = 0.04 * (torch.exp(d) - d - 1) - surrogate
    m = mask.double()
    loss = ((per_token * m).sum(1) / m.sum(1)).mean()
    loss.backward()
    # a gradient's own mistakes (a term detached) are named only where the loss itself is right
    value = adapters.grpo_loss(impl)(*inputs)
    right = isinstance(value, torch.Tensor) and value.shape == () and bool(
        torch.isclose(value.double(), loss.detach(), rtol=RTOL, atol=ATOL))
    assert_close(got, x.grad.to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint="the surrogate's gradient flows through the unclipped ratio only, the KL's through logps; "
                      "masked tokens get 0",
                 mistakes=mistakes.gradient_mistakes(*inputs, 0.2, 0.04) if right else None)


def test_from_scratch(target_folder):
    """No trl, transformers or peft (course.yml lists them)."""
    assert_from_scratch(target_folder, "grpo_loss")
