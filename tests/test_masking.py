"""masking: `causal_mask` and `apply_mask` in attention.py."""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_equal, check_tensor, fail
from checklib.masks import random_mask
from checklib.mistakes import masking as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error, naming_errors
from checklib.weights import randn
from grader.sandbox.protocol import StudentError, StudentTimeout
from grader.text import Phrase

# A masked score may be -inf, the dtype's lowest finite value, or any constant at or below this.
MASKED_AT_MOST = -1e9
MASK_HINT = ("where the mask is False (True means 'may attend') put -inf, torch.finfo(dtype).min "
             "or a constant <= -1e9; keep every other score as it is")


# ----------------------------------------------------------------------------- causal_mask

def expected_causal(q_len: int, k_len: int) -> torch.Tensor:
    """mask[i, j] = j <= i + (k_len - q_len), built entry by entry."""
    mask = torch.zeros(q_len, k_len, dtype=torch.bool)
    for i in range(q_len):
        for j in range(k_len):
            mask[i, j] = j <= i + (k_len - q_len)
    return mask


def sizes_asked(q_len: int, k_len: int) -> list[tuple[int, int]]:
    """The masks a case asks for: one query sees every key, an answer that a mask of ones gets right
    without the work, so a one-query case asks for a second query's mask as well; and a small mask is
    one that random booleans may hit (a (1, 1) and a (2, 2) mask, one time in 32), so a case asks for
    larger ones (one more query and key each) until it holds 16 entries at least."""
    sizes = [(q_len, k_len)]
    while q_len == 1 or sum(q * k for q, k in sizes) < 16:
        q_len, k_len = q_len + 1, k_len + 1
        sizes.append((q_len, k_len))
    return sizes


@pytest.mark.parametrize("q_len", [1, 2, 5])
def test_causal_mask_square(impl, q_len):
    for size, _ in sizes_asked(q_len, q_len):
        out = adapters.causal_mask(impl)(size)
        what = f"causal_mask({size})"
        check_tensor(out, what=what, shape=(size, size), dtype=torch.bool,
                     hint="k_len defaults to q_len; the mask is a bool tensor (True = may attend)")
        assert_equal(out, expected_causal(size, size), what=what,
                     hint="query i may attend keys 0..i: True on and below the diagonal",
                     mistakes=mistakes.causal_mask_mistakes(size, size, out))


@pytest.mark.parametrize("q_len, k_len", [(1, 1), (1, 5), (3, 7), (4, 4), (2, 6), (5, 6)])
def test_causal_mask_with_k_len(impl, q_len, k_len):
    causal_mask = adapters.causal_mask(impl)
    for q_len, k_len in sizes_asked(q_len, k_len):
        what = f"causal_mask({q_len}, {k_len})"
        for out in (causal_mask(q_len, k_len), causal_mask(q_len, k_len=k_len)):
            check_tensor(out, what=what, shape=(q_len, k_len), dtype=torch.bool,
                         hint="the mask is a bool tensor of shape (q_len, k_len)",
                         mistakes=mistakes.causal_mask_mistakes(q_len, k_len, out))
            assert_equal(out, expected_causal(q_len, k_len), what=what,
                         mistakes=mistakes.causal_mask_mistakes(q_len, k_len, out),
                         hint="the queries are the LAST q_len of the k_len positions: mask[i, j] is True exactly "
                              "when j <= i + (k_len - q_len), so the diagonal is shifted right by k_len - q_len")


# One query length with other key lengths, and one key length with other query lengths, in one round trip:
# nothing that one call keeps (a mask cached under q_len alone, or cut from the first one made) may answer another.
AGAIN_SIZES = [(3, 3), (3, 5), (3, 4), (2, 5), (5, 5), (1, 5)]


def test_causal_mask_asked_again_with_other_sizes(impl):
    for (q_len, k_len), out in zip(AGAIN_SIZES, adapters.causal_mask(impl).map(AGAIN_SIZES)):
        what = f"causal_mask({q_len}, {k_len})"
        check_tensor(out, what=what, shape=(q_len, k_len), dtype=torch.bool,
                     hint="the mask is a bool tensor of shape (q_len, k_len)",
                     mistakes=mistakes.causal_mask_mistakes(q_len, k_len, out))
        assert_equal(out, expected_causal(q_len, k_len), what=what,
                     mistakes=mistakes.causal_mask_mistakes(q_len, k_len, out),
                     hint="the queries are the LAST q_len of the k_len positions: mask[i, j] is True exactly "
                          "when j <= i + (k_len - q_len), so the diagonal is shifted right by k_len - q_len")


@pytest.mark.parametrize("q_len, k_len", [(3, None), (2, 5)])
def test_causal_mask_device(impl, q_len, k_len):
    causal_mask = adapters.causal_mask(impl)
    shape = (q_len, q_len if k_len is None else k_len)
    hint = "create the mask directly on the requested device (pass device= when you build it)"
    # First ask for the CPU while anything made without device= lands on the meta device: a mask
    # built on the requested device passes at once, one that ignores device= comes back on meta.
    # Tensors on meta have no data, and torch's first meta operations cost more than a second,
    # so only an answer this cannot settle (an error, e.g. from moving a meta tensor with
    # .to(device)) pays for asking for the meta device itself.
    try:
        out = causal_mask.with_default_device("meta", q_len, k_len, device="cpu")
    except StudentTimeout:
        raise
    except StudentError:  # NotImplementedError too: torch raises it for copying data out of meta
        out = None
    if out is not None:
        check_tensor(out, what=Phrase("causal_mask({q_len}, {k_len}, device='cpu') while the default device is meta",
                                      q_len=q_len, k_len=k_len),
                     shape=shape, dtype=torch.bool, device="cpu", hint=hint)
        return
    out = causal_mask(q_len, k_len, device="meta")
    check_tensor(out, what=f"causal_mask({q_len}, {k_len}, device='meta')", shape=shape, dtype=torch.bool,
                 device="meta", hint=hint)


@pytest.mark.parametrize("q_len, k_len", [(5, 3), (2, 1)])
def test_causal_mask_rejects_short_keys(impl, q_len, k_len):
    message = expect_value_error(adapters.causal_mask(impl), q_len, k_len,
                                 what=f"causal_mask({q_len}, {k_len})")
    assert message, "the ValueError should say what is wrong (k_len is smaller than q_len)"


# ----------------------------------------------------------------------------- apply_mask

def check_applied(out, scores: torch.Tensor, mask: torch.Tensor, what: str) -> None:
    check_tensor(out, what=what, shape=scores.shape, dtype=scores.dtype,
                 hint="the result has the scores' shape and dtype; the mask only broadcasts against them")
    full = mask.expand(scores.shape)
    assert_equal(out[full], scores[full], what=Phrase('{what} where the mask is True', what=what),
                 hint="scores where the mask is True must come back bit-identical; True means 'may attend'",
                 mistakes=mistakes.kept_where_allowed_mistakes(out, scores, full))
    masked = out[~full]
    bad = ~((masked <= MASKED_AT_MOST) | (masked == float("-inf")))
    if bool(bad.any()):
        fail(Phrase('{what} where the mask is False', what=what),
             Phrase("{int_bad_sum} of {masked_numel} values are not masked, e.g. {masked_bad_0_item} (expected "
                    "-inf, the dtype's lowest value, or <= -1e9)", int_bad_sum=int(bad.sum()),
                    masked_numel=masked.numel(), masked_bad_0_item=repr(masked[bad][0].item())),
             hint=MASK_HINT, actual=masked, mistakes=mistakes.masked_fill_mistakes(masked, scores[~full]))


# (scores shape, mask shape): 2-D and 4-D scores, Tq != Tk, Tq = 1, broadcast masks.
BROADCASTS = [
    ((4, 6), (4, 6)),
    ((1, 5), (1, 5)),
    ((2, 3, 4, 4), (4, 4)),
    ((2, 3, 3, 5), (2, 1, 3, 5)),
    ((2, 2, 1, 3), (2, 2, 1, 3)),
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shapes", BROADCASTS, ids=lambda s: "scores{}-mask{}".format(*("x".join(map(str, t)) for t in s)))
def test_apply_mask_values(impl, gen, shapes, dtype):
    scores_shape, mask_shape = shapes
    scores = randn(*scores_shape, gen=gen, dtype=dtype, scale=3.0)
    mask = random_mask(*mask_shape, gen=gen)
    out = adapters.apply_mask(impl)(scores, mask)
    check_applied(out, scores, mask, Phrase("apply_mask(scores {tuple_scores_shape}, mask {tuple_mask_shape})",
                                            tuple_scores_shape=tuple(scores.shape),
                                            tuple_mask_shape=tuple(mask.shape)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
# No single-query case: its causal mask is all True, so scores returned untouched would pass it.
@pytest.mark.parametrize("q_len, k_len", [(4, 4), (2, 5), (2, 3)])
def test_apply_mask_causal(impl, gen, q_len, k_len, dtype):
    scores = randn(2, 2, q_len, k_len, gen=gen, dtype=dtype)
    mask = expected_causal(q_len, k_len)
    out = adapters.apply_mask(impl)(scores, mask)
    check_applied(out, scores, mask, Phrase("apply_mask(scores {tuple_scores_shape}, causal mask ({q_len}, "
                                            "{k_len}))", tuple_scores_shape=tuple(scores.shape), q_len=q_len,
                                            k_len=k_len))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_apply_mask_zero_weight_for_low_scores(impl, gen, dtype):
    """Masked positions get exactly zero softmax weight even when the allowed scores are near -1e6."""
    scores = (-1e6 + randn(2, 3, 4, 6, gen=gen, dtype=torch.float64, scale=10.0)).to(dtype)
    mask = random_mask(2, 1, 4, 6, gen=gen)
    what = Phrase('softmax(apply_mask(scores near -1e6, mask), -1) ({dtype})', dtype=dtype)
    out = adapters.apply_mask(impl)(scores, mask)
    check_tensor(out, what=Phrase("apply_mask(scores {tuple_scores_shape}, mask {tuple_mask_shape})",
                                  tuple_scores_shape=tuple(scores.shape), tuple_mask_shape=tuple(mask.shape)),
                 shape=scores.shape, dtype=dtype)
    weights = out.softmax(dim=-1)
    full = mask.expand(scores.shape)
    assert_equal(weights[~full], torch.zeros(int((~full).sum()), dtype=dtype), what=what,
                 hint="a masked score must be far below any real score (-inf, finfo.min or <= -1e9), "
                      "not 0 or -1e4: real scores can be as low as -1e6")
    if bool(torch.isnan(weights).any()):
        fail(what, "the weights contain NaN", hint=MASK_HINT)


def test_apply_mask_none_returns_scores(impl, gen):
    for scores in (randn(3, 5, gen=gen), randn(2, 2, 4, 4, gen=gen, dtype=torch.float64)):
        what = Phrase('apply_mask(scores {tuple_scores_shape}, None)', tuple_scores_shape=tuple(scores.shape))
        with naming_errors(what, mistakes.MASK_NONE_FAILS):  # whatever it raised, on a mask of None
            out = adapters.apply_mask(impl)(scores, None)
        assert_equal(out, scores, what=what,
                     hint="with mask=None there is nothing to mask: return the scores unchanged")


def test_apply_mask_does_not_modify_inputs(impl, gen):
    scores = randn(2, 2, 3, 5, gen=gen)
    mask = random_mask(3, 5, gen=gen)
    _, (scores_after, mask_after) = adapters.apply_mask(impl).call_returning_args(scores, mask)
    assert_equal(scores_after, scores, what="scores after apply_mask(scores, mask)",
                 hint="functions must not modify their inputs in place: use masked_fill or torch.where, not masked_fill_",
                 mistakes=mistakes.filled_in_place_mistakes(scores, mask, scores_after))
    assert_equal(mask_after, mask, what="mask after apply_mask(scores, mask)",
                 hint="functions must not modify their inputs in place")


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for masking)."""
    assert_from_scratch(target_folder, "masking")
