"""head_splitting: `split_heads` and `merge_heads` in attention.py."""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_equal, check_tensor
from checklib.mistakes import head_splitting as mistakes
from checklib.student import expect_value_error
from checklib.weights import randn
from grader.text import Phrase

# (B, T, D, H): T = 1, H = 1, H = D, T != H.
SHAPES = [(2, 5, 12, 3), (1, 1, 8, 2), (3, 4, 6, 1), (2, 3, 4, 4), (2, 7, 16, 4)]
WHERE = "look at how (B, T, D) is viewed as (B, T, H, Dh) and which two dimensions are swapped"


def shapes_asked(shape: tuple[int, int, int, int]) -> list[tuple[int, int, int, int]]:
    """The layouts a case asks for: with one position or one head, reshaping x without swapping T and H
    is right already, so such a case asks for a layout with both as well."""
    _, length, _, n_heads = shape
    return [shape] + ([(2, 3, 8, 2)] if length == 1 or n_heads == 1 else [])


def expected_split(x: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The contract's layout built position by position: head h holds features h*Dh .. (h+1)*Dh-1."""
    batch, length, d_model = x.shape
    d_head = d_model // n_heads
    return torch.stack([x[:, :, h * d_head : (h + 1) * d_head] for h in range(n_heads)], dim=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_split_heads_layout(impl, gen, shape, dtype):
    for batch, length, d_model, n_heads in shapes_asked(shape):
        x = randn(batch, length, d_model, gen=gen, dtype=dtype)
        out = adapters.split_heads(impl)(x, n_heads)
        check_tensor(out, what=f"split_heads(x {tuple(x.shape)}, n_heads={n_heads})",
                     shape=(batch, n_heads, length, d_model // n_heads), dtype=dtype,
                     hint="the result is (B, H, T, Dh): heads come before the sequence",
                     mistakes=mistakes.split_mistakes(x, n_heads, out))
        assert_equal(out, expected_split(x, n_heads), what=f"split_heads(x {tuple(x.shape)}, n_heads={n_heads})",
                     hint=WHERE, mistakes=mistakes.split_mistakes(x, n_heads, out))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_merge_heads_layout(impl, gen, shape, dtype):
    for batch, length, d_model, n_heads in shapes_asked(shape):
        x = randn(batch, length, d_model, gen=gen, dtype=dtype)
        heads = expected_split(x, n_heads).contiguous()
        out = adapters.merge_heads(impl)(heads)
        assert_equal(out, x, what=f"merge_heads(x {tuple(heads.shape)})",
                     hint="merge_heads undoes split_heads: swap H and T back, then join H and Dh into D",
                     mistakes=mistakes.merge_mistakes(heads, out))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "B{}-T{}-D{}-H{}".format(*s))
def test_round_trip(impl, gen, shape):
    batch, length, d_model, n_heads = shape
    x = randn(batch, length, d_model, gen=gen)
    heads = adapters.split_heads(impl)(x, n_heads)
    back = adapters.merge_heads(impl)(heads)
    assert_equal(back, x, what="merge_heads(split_heads(x))", hint="the round trip must give x back exactly")


@pytest.mark.parametrize("d_model, n_heads", [(10, 3), (8, 3), (6, 4)])
def test_split_heads_rejects_indivisible(impl, gen, d_model, n_heads):
    x = randn(2, 3, d_model, gen=gen)
    message = expect_value_error(adapters.split_heads(impl), x, n_heads,
                                 what=Phrase("split_heads with d_model={d_model}, n_heads={n_heads}",
                                             d_model=d_model, n_heads=n_heads))
    assert message, "the ValueError should say what is wrong (d_model is not divisible by n_heads)"


def test_split_heads_does_not_modify_input(impl, gen):
    x = randn(2, 4, 8, gen=gen)
    _, (after, _) = adapters.split_heads(impl).call_returning_args(x, 2)
    assert_equal(after, x, what="x after split_heads(x, 2)", hint="functions must not modify their inputs in place",
                 mistakes=mistakes.split_in_place_mistakes(x, 2))
