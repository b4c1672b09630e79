"""scaling: `attention_scores` in attention.py."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, diagnosed, fail
from checklib.mistakes import scaling as mistakes
from checklib.weights import randn
from grader.sandbox.protocol import StudentError
from grader.source import UnreadableFile, read_text
from grader.text import Phrase

# (leading dims, Tq, Tk, d): 2-D, 3-D and 4-D inputs; Tq != Tk; d != Tq, Tk so a scale
# taken from the wrong dimension shows; d = 1 (where every scale is the same) as a plain case.
CASES = [
    ((), 3, 5, 4),
    ((2,), 1, 4, 16),
    ((2,), 6, 2, 64),
    ((2, 3), 5, 7, 8),
    ((1, 2), 4, 4, 16),
    ((2, 2), 1, 3, 1),
]
WHERE = "scores are q @ k^T divided by sqrt(d), d = q.size(-1); transpose only the last two dimensions of k"


def case_id(case) -> str:
    lead, tq, tk, d = case
    return "lead{}-Tq{}-Tk{}-d{}".format("x".join(map(str, lead)) or "0", tq, tk, d)


def expected_scores(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """q k^T / sqrt(d) in float64, rounded to the inputs' dtype."""
    exact = torch.matmul(q.double(), k.double().transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return exact.to(q.dtype)


def scores_of(impl, folder: str, q: torch.Tensor, k: torch.Tensor, what: str):
    """attention_scores(q, k); an error that a rank-specific transpose in the code explains is named."""
    try:
        return adapters.attention_scores(impl)(q, k)
    except StudentError as exc:
        if type(exc) is StudentError and mistakes.k_not_transposed(exc.message, tuple(q.shape), tuple(k.shape)):
            raise diagnosed(Phrase("{what}: {problem}", what=what, problem=exc.describe()), mistakes.K_NOT_TRANSPOSED) from None
        if type(exc) is StudentError:
            try:
                source = read_text(Path(folder) / "attention.py")  # never a link, a FIFO or megabytes
            except UnreadableFile:
                source = ""
            found = mistakes.transpose_mistakes(source)
            if len(found) == 1:
                raise diagnosed(Phrase("{what}: {problem}", what=what, problem=exc.describe()), found[0]) from None
        raise


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_attention_scores_values(impl, target_folder, gen, case, dtype):
    lead, tq, tk, d = case
    q = randn(*lead, tq, d, gen=gen, dtype=dtype)
    k = randn(*lead, tk, d, gen=gen, dtype=dtype)
    what = f"attention_scores(q {tuple(q.shape)}, k {tuple(k.shape)})"
    out = scores_of(impl, target_folder, q, k, what)
    check_tensor(out, what=what, shape=(*lead, tq, tk), dtype=dtype,
                 hint="the result is (..., Tq, Tk) in the inputs' dtype: the leading dimensions are kept "
                      "and k is transposed in its last two dimensions only",
                 mistakes=mistakes.scores_mistakes(q, k, out))
    assert_close(out, expected_scores(q, k), what=what, hint=WHERE, mistakes=mistakes.scores_mistakes(q, k, out))


@pytest.mark.parametrize("d", [4, 16, 64])
def test_scale_is_one_over_sqrt_d(impl, target_folder, gen, d):
    """q = k = one unit vector: every score is exactly 1 / sqrt(d), whatever the lengths."""
    q = torch.zeros(2, 3, d, dtype=torch.float64)
    q[..., 0] = 1.0
    k = torch.zeros(2, 5, d, dtype=torch.float64)
    k[..., 0] = 1.0
    out = scores_of(impl, target_folder, q, k, f"attention_scores(q (2, 3, {d}), k (2, 5, {d}))")
    assert_close(out, torch.full((2, 3, 5), 1.0 / math.sqrt(d), dtype=torch.float64),
                 what=Phrase('attention_scores of unit vectors with d={d} (every score should be 1/sqrt({d}))', d=d),
                 hint="divide the dot products by sqrt(d) with d the feature size q.size(-1): not d itself, "
                      "not the sequence length, and do not multiply",
                 mistakes=mistakes.scores_mistakes(q, k))


def test_scaled_scores_are_not_saturated(impl, gen):
    """With unit-variance q and k the scaled scores have a standard deviation near 1,
    so the softmax over them stays spread out instead of collapsing onto one key."""
    d, tq, tk = 256, 64, 64
    q = randn(2, tq, d, gen=gen)
    k = randn(2, tk, d, gen=gen)
    out = adapters.attention_scores(impl)(q, k)
    check_tensor(out, what="attention_scores(q (2, 64, 256), k (2, 64, 256))", shape=(2, tq, tk), dtype=torch.float32)
    std = out.double().std().item()
    # Sampling spread of the std over 8192 scores is about 1%; 0.85..1.15 is a wide margin,
    # while a missing or wrong scale moves it by a factor of 2 or more.
    if not 0.85 < std < 1.15:
        fail(Phrase('attention_scores of unit-variance q, k with d={d}', d=d),
             Phrase("the scores' standard deviation is {std}, expected about 1", std=format(std, '.3g')),
             hint="dividing by sqrt(d) keeps the scores' variance at 1; "
                  "no scale gives about sqrt(d) = 16, dividing by d gives about 1/16")
    top = out.double().softmax(dim=-1).max(dim=-1).values.mean().item()
    if not top < 0.5:
        fail(Phrase('softmax(attention_scores(q, k)) with d={d}', d=d),
             Phrase("on average the largest weight of a row is {top}, the softmax is saturated",
                    top=format(top, '.3g')),
             hint="without the 1/sqrt(d) scale the scores grow with d")


def test_attention_scores_does_not_modify_inputs(impl, gen):
    q = randn(2, 3, 4, 8, gen=gen)
    k = randn(2, 3, 5, 8, gen=gen)
    _, (q_after, k_after) = adapters.attention_scores(impl).call_returning_args(q, k)
    assert_equal(q_after, q, what="q after attention_scores(q, k)", hint="functions must not modify their inputs in place",
                 mistakes=mistakes.q_scaled_in_place_mistakes(q))
    assert_equal(k_after, k, what="k after attention_scores(q, k)", hint="functions must not modify their inputs in place")
