"""dpo_loss: `sequence_logprobs` and `dpo_loss` in alignment.py.

The expected values are computed here, in float64, another way than the contract writes them: a sequence's
log-probability as a loop over its masked positions of logit - logsumexp, and the loss as
softplus(-beta * margin) (= -logsigmoid), with its gradient -beta * sigmoid(-beta * margin) / B written out.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import dpo_loss as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error, naming_errors
from checklib.tolerance import ATOL, RTOL
from checklib.weights import randn
from grader.sandbox.protocol import StudentError
from grader.text import Phrase

DTYPES = [torch.float32, torch.float64]
SUM = ("the sum over the positions where mask is True of log_softmax(logits[b, t])[labels[b, t]]; no shift "
       "inside, and labels under a False mask never used as indices")
LOSS = ("mean(-logsigmoid(beta * ((policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)))), "
        "a 0-dim tensor")


def expected_logprobs(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    x = logits.double()
    out = torch.zeros(x.shape[0], dtype=torch.float64)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            if mask[b, t]:
                out[b] += x[b, t, labels[b, t]] - torch.logsumexp(x[b, t], 0)
    return out


def sequence_case(gen: torch.Generator, dtype: torch.dtype, masked_labels: str):
    """(B=4, T=7, V=11) logits, a mask with gaps (prompt and padding off, a hole) and an all-False row."""
    logits = randn(4, 7, 11, gen=gen, dtype=dtype, scale=2.0)
    labels = torch.randint(0, 11, (4, 7), generator=gen)
    mask = torch.ones(4, 7, dtype=torch.bool)
    mask[0, :2] = False  # the prompt
    mask[1, 5:] = False  # padding
    mask[2, 3] = False  # a hole
    mask[3] = False  # nothing to score
    if masked_labels == "minus100":
        labels = labels.masked_fill(~mask, -100)
    return logits, labels, mask


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("masked_labels", ["tokens", "minus100"])
def test_sequence_logprobs_matches_formula(impl, gen, dtype, masked_labels):
    logits, labels, mask = sequence_case(gen, dtype, masked_labels)
    what = (Phrase("sequence_logprobs(logits (4, 7, 11), labels, mask with gaps and an all-False row), labels "
                   "-100 under the False mask ({dtype})", dtype=dtype) if masked_labels == "minus100" else
            Phrase("sequence_logprobs(logits (4, 7, 11), labels, mask with gaps and an all-False row), token ids "
                   "under the False mask ({dtype})", dtype=dtype))
    with naming_errors(what, mistakes.GATHERED_MASKED_LABELS,
                       lambda exc: "out of bounds" in exc.message or "-100" in exc.message):
        out = adapters.sequence_logprobs(impl)(logits, labels, mask)
    check_tensor(out, what=what, shape=(4,), dtype=dtype, hint="one log-probability per sequence, (B,), in the logits' dtype")
    assert_close(out, expected_logprobs(logits, labels, mask).to(dtype), what=what, rtol=RTOL, atol=ATOL, hint=SUM,
                 mistakes=mistakes.sequence_mistakes(logits, labels, mask))


@pytest.mark.parametrize("dtype", DTYPES)
def test_sequence_logprobs_gradient(impl, gen, dtype):
    logits, labels, mask = sequence_case(gen, dtype, "minus100")
    what = Phrase("the gradient of sequence_logprobs(logits (4, 7, 11), labels, mask) with respect to the logits "
                  "({dtype})", dtype=dtype)
    got = adapters.sequence_logprobs(impl).grad(logits, labels, mask, grad_output=torch.ones(4, dtype=dtype))["args"][0]
    if got is None:
        fail(what, "no gradient reached the logits", hint="compute with tensor operations on the logits; .item(), "
             ".detach() or torch.no_grad() cut the graph")
    # d/dlogits of sum log p[label] = one_hot(label) - softmax, at the masked positions only
    x = logits.double()
    want = (F.one_hot(labels.clamp(min=0), 11).double() - torch.softmax(x, -1)) * mask.unsqueeze(-1)
    assert_close(got, want.to(dtype), what=what, rtol=RTOL, atol=ATOL,
                 hint="one_hot(label) - softmax(logits) where mask is True, 0 elsewhere")


def test_sequence_logprobs_leaves_its_inputs_alone(impl, gen):
    logits, labels, mask = sequence_case(gen, torch.float32, "minus100")
    _, (logits_after, labels_after, mask_after) = adapters.sequence_logprobs(impl).call_returning_args(
        logits, labels, mask)
    for name, after, before in (("logits", logits_after, logits), ("labels", labels_after, labels),
                                ("mask", mask_after, mask)):
        assert_equal(after, before, what=Phrase("{name} after sequence_logprobs(logits, labels, mask)", name=name),
                     hint="functions must not modify their inputs in place: torch.where(mask, labels, 0) makes a "
                          "new tensor", mistakes=mistakes.labels_in_place_mistakes(labels, mask) if name == "labels"
                     else None)


@pytest.mark.parametrize("bad", ["labels", "mask", "both"])
def test_sequence_logprobs_rejects_mismatched_shapes(impl, gen, bad):
    logits = randn(2, 5, 7, gen=gen)
    labels = torch.randint(0, 7, (2, 4) if bad in ("labels", "both") else (2, 5), generator=gen)
    mask = torch.ones((5, 2) if bad in ("mask", "both") else (2, 5), dtype=torch.bool)
    expect_value_error(adapters.sequence_logprobs(impl), logits, labels, mask,
                       what=Phrase("sequence_logprobs(logits (2, 5, 7), labels {labels}, mask {mask})",
                                   labels=tuple(labels.shape), mask=tuple(mask.shape)))


def pairs(gen: torch.Generator, dtype: torch.dtype, batch: int = 6, spread: float = 8.0):
    """Sequence log-probabilities as a model gives them: negative, policy near the reference."""
    ref_c = -20 - 30 * torch.rand(batch, generator=gen, dtype=torch.float64)
    ref_r = -20 - 30 * torch.rand(batch, generator=gen, dtype=torch.float64)
    pol_c = ref_c + spread * (2 * torch.rand(batch, generator=gen, dtype=torch.float64) - 1)
    pol_r = ref_r + spread * (2 * torch.rand(batch, generator=gen, dtype=torch.float64) - 1)
    return tuple(t.to(dtype) for t in (pol_c, pol_r, ref_c, ref_r))


def expected_dpo(pc, pr, rc, rr, beta):
    pc, pr, rc, rr = (t.double() for t in (pc, pr, rc, rr))
    margin = (pc - rc) - (pr - rr)
    return F.softplus(-beta * margin).mean(), beta * (pc - rc), beta * (pr - rr)


def check_dpo(impl, inputs, beta, what, dtype):
    out = adapters.dpo_loss(impl)(*inputs, beta=beta)
    if not isinstance(out, tuple) or len(out) != 3:
        fail(what, Phrase("expected a tuple (loss, chosen_rewards, rejected_rewards), got {got}",
                          got=type(out).__name__), hint="return loss, chosen_rewards, rejected_rewards")
    loss, chosen, rejected = out
    want_loss, want_chosen, want_rejected = expected_dpo(*inputs, beta)
    check_tensor(loss, what=Phrase("the loss of {what}", what=what), shape=(), dtype=dtype,
                 hint="the loss is a 0-dim tensor in the inputs' dtype: the mean over the batch")
    assert_close(loss, want_loss.to(dtype), what=Phrase("the loss of {what}", what=what), rtol=RTOL, atol=ATOL,
                 hint=LOSS, mistakes=mistakes.loss_mistakes(*inputs, beta))
    for name, got, want, is_chosen in (("chosen_rewards", chosen, want_chosen, True),
                                       ("rejected_rewards", rejected, want_rejected, False)):
        assert_close(got, want.to(dtype), what=Phrase("{name} of {what}", name=name, what=what), rtol=RTOL,
                     atol=ATOL, hint="beta * (policy - ref), chosen with chosen and rejected with rejected",
                     mistakes=mistakes.reward_mistakes(*inputs, beta, is_chosen))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_loss_matches_formula(impl, gen, dtype, beta):
    inputs = pairs(gen, dtype)
    check_dpo(impl, inputs, beta, Phrase("dpo_loss(4 tensors (6,), beta={beta}) ({dtype})", beta=beta, dtype=dtype),
              dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_dpo_loss_default_beta(impl, gen, dtype):
    inputs = pairs(gen, dtype)
    check_dpo(impl, inputs, 0.1, Phrase("dpo_loss(4 tensors (6,)) with the default beta ({dtype})", dtype=dtype),
              dtype)


def huge_pairs(dtype: torch.dtype):
    """beta * margin of -1e3, -50, 0, 50 and +1e3 with beta = 0.5."""
    ref = torch.full((5,), -100.0, dtype=torch.float64)
    margins = torch.tensor([-2e3, -100.0, 0.0, 100.0, 2e3], dtype=torch.float64)
    return tuple(t.to(dtype) for t in (ref + 0.75 * margins, ref - 0.25 * margins, ref, ref))


@pytest.mark.parametrize("dtype", DTYPES)
def test_dpo_loss_large_margins(impl, dtype):
    inputs = huge_pairs(dtype)
    check_dpo(impl, inputs, 0.5, Phrase("dpo_loss with beta * margin from -1e3 to +1e3 ({dtype})", dtype=dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("margins", ["ordinary", "large"])
def test_dpo_loss_gradient(impl, gen, dtype, margins):
    """d loss / d policy_chosen = -beta * sigmoid(-beta * margin) / B, and the opposite for policy_rejected."""
    beta = 0.5 if margins == "large" else 0.1
    inputs = huge_pairs(dtype) if margins == "large" else pairs(gen, dtype)
    got = adapters.dpo_loss(impl).grad(*inputs, beta=beta, grad_output=torch.tensor(1.0, dtype=dtype),
                                       output_index=0)["args"]
    pc, pr, rc, rr = (t.double() for t in inputs)
    step = -beta * torch.sigmoid(-beta * ((pc - rc) - (pr - rr))) / pc.numel()
    for index, name, want in ((0, "policy_chosen", step), (1, "policy_rejected", -step)):
        what = Phrase("the gradient of dpo_loss's loss with respect to {name}, {margins} margins ({dtype})",
                      name=name, margins=margins, dtype=dtype)
        if got[index] is None:
            fail(what, "no gradient reached the policy's log-probabilities",
                 hint="compute the loss with tensor operations; .item(), .detach() or torch.no_grad() cut the graph")
        assert_close(got[index], want.to(dtype), what=what, rtol=RTOL, atol=ATOL,
                     hint="-beta * sigmoid(-beta * margin) / B for policy_chosen, finite however large the margin: "
                          "F.logsigmoid's gradient is")


def test_dpo_rewards_are_detached(impl, gen):
    inputs = pairs(gen, torch.float64)
    for index, name in ((1, "chosen_rewards"), (2, "rejected_rewards")):
        try:
            got = adapters.dpo_loss(impl).grad(*inputs, grad_output=torch.ones(6, dtype=torch.float64),
                                               output_index=index)["args"]
        except StudentError as exc:
            if "does not require grad" in exc.message or "does not have a grad_fn" in exc.message:
                continue
            raise
        if any(g is not None for g in got):
            fail(Phrase("{name} of dpo_loss(4 tensors (6,))", name=name), "a gradient flows through it",
                 hint="return the rewards detached: beta * (policy - ref).detach()", actual=True,
                 mistakes={mistakes.REWARDS_ATTACHED: True})


@pytest.mark.parametrize("bad", [0, 1, 2, 3])
def test_dpo_loss_rejects_mismatched_shapes(impl, gen, bad):
    inputs = list(pairs(gen, torch.float32))
    inputs[bad] = inputs[bad][:4]
    names = ("policy_chosen", "policy_rejected", "ref_chosen", "ref_rejected")
    expect_value_error(adapters.dpo_loss(impl), *inputs,
                       what=Phrase("dpo_loss with {name} of shape (4,) and the others (6,)", name=names[bad]))


def test_from_scratch(target_folder):
    """No trl, transformers or peft (course.yml lists them)."""
    assert_from_scratch(target_folder, "dpo_loss")
