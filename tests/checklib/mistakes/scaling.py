"""The known mistakes of `scaling` (Scaled dot-product scores): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import ast
import math
import re
from typing import Any

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised


def scores(q: Tensor, k: Tensor, scale: float) -> Tensor:
    return q.double() @ k.double().transpose(-2, -1) * scale


SCORES_MISTAKES = (
    mistake("scaling", "no_scale", "your scores equal q·kᵀ without the 1/√d factor (d = q.size(-1))",
            lambda q, k: scores(q, k, 1.0)),
    mistake("scaling", "divided_by_d", "your scores are q·kᵀ divided by d instead of by √d",
            lambda q, k: scores(q, k, 1.0 / q.shape[-1])),
    mistake("scaling", "softmax_applied",
            "your attention_scores applies softmax already: it returns the scaled scores q·kᵀ/√d, and the softmax "
            "comes later, in scaled_dot_product_attention",
            lambda q, k: scores(q, k, q.shape[-1] ** -0.5).softmax(dim=-1)),
    mistake("scaling", "multiplied_by_sqrt_d", "your scores are q·kᵀ multiplied by √d instead of divided by it",
            lambda q, k: scores(q, k, math.sqrt(q.shape[-1]))),
    mistake("scaling", "divided_by_sqrt_queries",
            "your scores are q·kᵀ divided by √Tq, the square root of the number of queries (dim -2), "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(q.shape[-2]))),
    mistake("scaling", "divided_by_sqrt_keys",
            "your scores are q·kᵀ divided by √Tk, the square root of the number of keys, "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(k.shape[-2]))),
    mistake("scaling", "scores_transposed",
            "your scores are k·qᵀ/√d, (..., Tk, Tq), one row per key: they are q·kᵀ/√d, (..., Tq, Tk), one row per "
            "query (q @ k.transpose(-2, -1); an einsum '...qd,...kd->...qk')",
            lambda q, k: scores(k, q, q.shape[-1] ** -0.5)),
    mistake("scaling", "half_power_as_division",
            "your scores are q·kᵀ divided by 2d: Python reads d ** 1 / 2 as (d ** 1) / 2 (** binds tighter than /), "
            "so x / d ** 1 / 2 is x / d / 2: the square root is d ** 0.5 or math.sqrt(d)",
            lambda q, k: scores(q, k, 0.5 / q.shape[-1])),
    mistake("scaling", "half_power_in_parentheses",
            "your scores are q·kᵀ divided by d/2: Python reads (d ** 1 / 2) as (d ** 1) / 2 (** binds tighter "
            "than /): the square root is d ** 0.5 or math.sqrt(d)",
            lambda q, k: scores(q, k, 2.0 / q.shape[-1])),
    mistake("scaling", "divided_by_sqrt_first_dim",
            "your scores are q·kᵀ divided by the square root of q's first dimension (q.size(0), the batch), "
            "instead of √d, the feature size (dim -1)", lambda q, k: scores(q, k, 1.0 / math.sqrt(q.shape[0]))),
)
K_DOT_T = recognised("scaling", "k_dot_t",
                     "your attention_scores uses k.T, which reverses every dimension of a batched k: transpose only "
                     "the last two, k.transpose(-2, -1) (or k.mT)")
FIXED_TRANSPOSE = recognised("scaling", "fixed_transpose",
                             "your attention_scores transposes fixed dimensions of k, such as k.transpose(1, 2), "
                             "which is right for 3-D inputs only: transpose the last two, k.transpose(-2, -1), "
                             "whatever the leading dimensions")


def transpose_mistakes(source: str) -> list[Mistake]:
    """What attention_scores in `source` (the student's attention.py) writes that breaks on other ranks:
    `.T`, or a transpose / swapaxes / permute by fixed, non-negative dimensions."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[Mistake] = []
    for node in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "attention_scores"):
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr == "T" and K_DOT_T not in found:
                found.append(K_DOT_T)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                    sub.func.attr in ("transpose", "swapaxes", "swapdims", "permute"):
                dims = [a.value for a in sub.args if isinstance(a, ast.Constant) and isinstance(a.value, int)]
                if dims and all(d >= 0 for d in dims) and FIXED_TRANSPOSE not in found:
                    found.append(FIXED_TRANSPOSE)
    return found


K_NOT_TRANSPOSED = recognised("scaling", "k_not_transposed",
                              "your scores multiply q by k as it is (q @ k), so d meets Tk: each query is compared "
                              "with each key over d, q @ k.transpose(-2, -1), which gives (..., Tq, Tk)")
UNMULTIPLIABLE = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")
BATCH2_SIZES = re.compile(r"dimensions of batch2 tensor to be: \[(\d+), (\d+)\] but got: \[(\d+), (\d+)\]")


def k_not_transposed(message: str, q_shape: tuple[int, ...], k_shape: tuple[int, ...]) -> bool:
    """Whether torch's matmul error says that q (..., Tq, d) met k (..., Tk, d) untransposed: 2-D q and k as
    (Tq x d) and (Tk x d), batched ones as a batch2 of (B, Tk) where (B, d) was expected."""
    if len(q_shape) < 2 or len(q_shape) != len(k_shape):
        return False
    (tq, d), tk, batch = q_shape[-2:], k_shape[-2], math.prod(q_shape[:-2])
    pair = UNMULTIPLIABLE.search(message)
    if pair is not None:
        return len(q_shape) == 2 and tuple(map(int, pair.groups())) == (tq, d, tk, d)
    sizes = BATCH2_SIZES.search(message)
    return sizes is not None and tuple(map(int, sizes.groups())) == (batch, d, batch, tk)


Q_SCALED_IN_PLACE = mistake("scaling", "q_scaled_in_place",
                            "attention_scores divided the caller's q by √d in place (q /= ...): "
                            "compute a new tensor instead", lambda q: q.double() / math.sqrt(q.shape[-1]))


OTHER_SCALE = mistake("scaling", "other_scale",
                      "your scores are q·kᵀ times a constant, but not 1/√d: the scale is 1/math.sqrt(d) with d = "
                      "q.size(-1), the feature size (the values above show the ratio)",
                      lambda q, k, factor: scores(q, k, factor))


# A family: the scores divided by another power of d (0, 1 and -0.5 are entries of their own).
POWER_OF_D = mistake("scaling", "power_of_d",
                     "your scores are q·kᵀ / d**{power}: the scale is 1/√d, q·kᵀ / d**0.5 with d = q.size(-1)",
                     lambda q, k, power: scores(q, k, q.shape[-1] ** -power))
POWERS = (2, 1.5, 0.25, 0.75, -1)


# A family: the scale read from a leading dimension by a fixed index (size(1) is the heads of (B, H, T, d));
# dim 0 (divided_by_sqrt_first_dim) and the positions' dims are entries of their own.
SQRT_OF_LEADING_DIM = mistake("scaling", "sqrt_of_leading_dim",
                              "your scores are q·kᵀ divided by √q.size({dim}), a leading dimension of q "
                              "(the heads of (B, H, T, d)), instead of √d, the feature size: q.size(-1)",
                              lambda q, k, dim: scores(q, k, q.shape[dim] ** -0.5))


def _leading_dims(q: Tensor) -> list[int]:
    """q's dims between the first and the positions whose size tells them from d, Tq and 1."""
    return [dim for dim in range(1, q.dim() - 2) if q.shape[dim] not in (1, q.shape[-1], q.shape[-2])]


def scores_mistakes(q: Tensor, k: Tensor, got: Any = None) -> Mistakes:
    """For attention_scores(q, k); also another power of d (POWERS), a leading dim's size, and given what came
    back, a scale no entry names, fitted to it."""
    family = {POWER_OF_D.text(power=f"{power:g}"): POWER_OF_D.on(q, k, power) for power in POWERS}
    leading = {SQRT_OF_LEADING_DIM.text(dim=dim): SQRT_OF_LEADING_DIM.on(q, k, dim)
               for dim in _leading_dims(q)}
    return {**bind(SCORES_MISTAKES, q, k), **family, **leading, **_other_scale(q, k, got)}


def _other_scale(q: Tensor, k: Tensor, got: Any) -> Mistakes:
    """q·kᵀ times the one factor that `got` is of it, where no named mistake's factor is that one (computed
    only when the check fails, as every model is)."""
    return {OTHER_SCALE: lambda: _fitted_scale(q, k, got)}


def _fitted_scale(q: Tensor, k: Tensor, got: Any) -> Tensor | None:
    raw = scores(q, k, 1.0)
    if not isinstance(got, Tensor) or got.shape != raw.shape or not bool(torch.isfinite(got).all()):
        return None
    norm = float((raw * raw).sum())
    if norm == 0:
        return None
    factor = float((got.double() * raw).sum()) / norm
    d, known = q.shape[-1], [1.0, q.shape[-1] ** -0.5]
    known += [1.0 / d, math.sqrt(d), q.shape[-2] ** -0.5, k.shape[-2] ** -0.5, q.shape[0] ** -0.5, 0.5 / d, 2.0 / d]
    known += [d ** -power for power in POWERS] + [q.shape[dim] ** -0.5 for dim in _leading_dims(q)]
    if factor == 0 or any(math.isclose(factor, f, rel_tol=1e-3) for f in known):
        return None
    return OTHER_SCALE.model(q, k, factor)


def q_scaled_in_place_mistakes(q: Tensor) -> Mistakes:
    return bind([Q_SCALED_IN_PLACE], q)
