"""The known mistakes of `cross_entropy` (Softmax and cross-entropy): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

import torch
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised
from .general import besides


# The softmax mistakes are computed in the input's dtype, not float64: what goes wrong (an exp that
# overflows to inf, a softmax that underflows to 0 before its log) depends on the dtype's range.

def _naive_softmax(x: Tensor, dim: int) -> Tensor:
    e = torch.exp(x)
    return e / e.sum(dim=dim, keepdim=True)


def _other_than_last(dim: int, x: Tensor) -> bool:
    return dim % x.dim() != x.dim() - 1


def _sum_over_last(e: Tensor) -> Tensor:
    return e / e.sum(dim=-1, keepdim=True)


SOFTMAX_MISTAKES = (
    mistake("cross_entropy", "softmax_max_not_subtracted",
            "your softmax does not subtract the maximum first: exp of a large score overflows to inf and inf/inf "
            "is NaN; softmax(x) = softmax(x - max(x)), so shift every row by its maximum",
            lambda x, dim: _naive_softmax(x, dim)),
    mistake("cross_entropy", "softmax_global_max",
            "your softmax subtracts the maximum of the whole tensor instead of each row's own maximum "
            "(amax(dim, keepdim=True)): a row far below it underflows to 0/0", lambda x, dim: _naive_softmax(x - x.max(), dim)),
    mistake("cross_entropy", "softmax_last_dim", "your softmax ignores `dim` and always normalises over the last dimension",
            lambda x, dim: torch.softmax(x, -1) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "softmax_sum_last_dim",
            "your softmax subtracts the maximum along `dim` but sums along the last dimension: every reduction of "
            "softmax(x, dim) runs along dim, e / e.sum(dim=dim, keepdim=True)",
            lambda x, dim: _sum_over_last(torch.exp(x - x.amax(dim=dim, keepdim=True))) if _other_than_last(dim, x)
            else None),
    mistake("cross_entropy", "softmax_max_last_dim",
            "your softmax subtracts the maximum along the last dimension but sums along `dim`: the shift must be "
            "constant along dim, x.amax(dim=dim, keepdim=True), or it changes the result",
            lambda x, dim: _naive_softmax(x - x.amax(dim=-1, keepdim=True), dim) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "softmax_max_without_keepdim",
            "your softmax subtracts x.max(dim).values without keepdim=True, so the maxima broadcast along the "
            "wrong dimension", lambda x, dim: _naive_softmax(x - x.max(dim=dim).values, dim)),
)
LOG_SOFTMAX_MISTAKES = (
    mistake("cross_entropy", "log_of_softmax",
            "your log_softmax is log(softmax(x)): where the softmax underflows to 0 its log is -inf; compute "
            "x - max - log(sum(exp(x - max))) instead", lambda x, dim: torch.log(torch.softmax(x, dim))),
    mistake("cross_entropy", "log_softmax_max_not_subtracted",
            "your log_softmax computes x - log(sum(exp(x))) without subtracting the maximum first: exp overflows "
            "to inf", lambda x, dim: x - torch.log(torch.exp(x).sum(dim=dim, keepdim=True))),
    mistake("cross_entropy", "log_softmax_off_by_max",
            "your log_softmax is off by the maximum: x - log(sum(exp(x - max))) needs the max subtracted from x "
            "too (x - max - log(sum(exp(x - max))))",
            lambda x, dim: torch.log_softmax(x, dim) + x.amax(dim=dim, keepdim=True)),
    mistake("cross_entropy", "log_softmax_last_dim",
            "your log_softmax ignores `dim` and always normalises over the last dimension",
            lambda x, dim: torch.log_softmax(x, -1) if _other_than_last(dim, x) else None),
    mistake("cross_entropy", "log_softmax_negated",
            "your log_softmax has the wrong sign, log(sum(exp(x - max))) - (x - max): it is x - max - "
            "log(sum(exp(x - max))), never positive", lambda x, dim: -torch.log_softmax(x, dim)),
    mistake("cross_entropy", "log_softmax_global_max",
            "your log_softmax subtracts the maximum of the whole tensor instead of each row's own maximum",
            lambda x, dim: (x - x.max()) - torch.log(torch.exp(x - x.max()).sum(dim=dim, keepdim=True))),
)


class _Targets(NamedTuple):
    """A cross-entropy case flattened: logits (N, V) in float64, targets (N,), the kept rows, log p, and
    log p[target] of the kept rows."""

    flat: Tensor
    t: Tensor
    keep: Tensor
    logp: Tensor
    picked: Tensor
    ignore_index: int
    raw: Tensor  # the logits as given, (..., V), float64


def _normalised_over_first_dim(c: _Targets) -> Tensor | None:
    if c.raw.dim() < 2:
        return None
    logp = torch.log_softmax(c.raw, 0).reshape(-1, c.raw.shape[-1])
    return -logp[c.keep].gather(1, c.t[c.keep].unsqueeze(1)).mean()


def _ignoring_minus_100(c: _Targets) -> Tensor | None:
    if c.ignore_index == -100:
        return None
    k = c.t != -100
    return -torch.log_softmax(c.flat, -1)[k].gather(1, c.t[k].unsqueeze(1)).mean()


CE_IGNORES_MINUS_100 = mistake("cross_entropy", "ignores_minus_100",
                               "your cross_entropy ignores -100 whatever ignore_index says: compare the targets "
                               "with the ignore_index argument", _ignoring_minus_100)
CROSS_ENTROPY_MISTAKES = (
    mistake("cross_entropy", "mean_counts_ignored",
            "your mean counts the ignored positions too: divide by the number of targets that are not "
            "ignore_index", lambda c: -c.picked.sum() / c.t.numel()),
    CE_IGNORES_MINUS_100,
    mistake("cross_entropy", "sum_not_mean", "you returned the sum of -log p[target], not the mean over the kept positions",
            lambda c: -c.picked.sum()),
    mistake("cross_entropy", "no_minus_sign",
            "your loss has the wrong sign, the mean of +log p[target] (a minus forgotten, or a log_softmax whose sign is "
            "flipped): cross-entropy is the mean of -log p[target]", lambda c: c.picked.mean()),
    mistake("cross_entropy", "probability_not_log",
            "you averaged -p[target] (the probability) instead of -log p[target]", lambda c: -c.picked.exp().mean()),
    mistake("cross_entropy", "every_class_averaged",
            "you averaged the log-probabilities of every class, not only the target's", lambda c: -c.logp[c.keep].mean()),
    mistake("cross_entropy", "indexed_every_target",
            "you indexed logp[:, targets], which takes every row's log-probabilities at every target (an N x N "
            "matrix): pick one entry per row (gather, or logp[arange(N), targets])",
            lambda c: -c.logp[c.keep][:, c.t[c.keep]].mean()),
    mistake("cross_entropy", "log_softmax_over_first_dim",
            "your log-probabilities are normalised over the first dimension (dim=0, across the positions) instead "
            "of over the classes (dim=-1)", _normalised_over_first_dim),
    mistake("cross_entropy", "logits_as_log_probabilities",
            "your cross_entropy uses the logits themselves as log-probabilities (no log_softmax)",
            lambda c: -c.flat[c.keep].gather(1, c.t[c.keep].unsqueeze(1)).mean()),
)
MAX_SUBTRACTED_IN_PLACE = mistake("cross_entropy", "max_subtracted_in_place",
                                  "your code subtracted the maximum from the caller's tensor in place (x -= ...): "
                                  "compute a new tensor instead", lambda x, dim: x - x.amax(dim=dim, keepdim=True))


# Families: a dim written into the code, whatever `dim` says (the last one is softmax_last_dim's).
SOFTMAX_FIXED_DIM = mistake("cross_entropy", "softmax_fixed_dim",
                            "your softmax always normalises over dim={dim}, whatever `dim` says: normalise over the "
                            "dim given", dict())
LOG_SOFTMAX_FIXED_DIM = mistake("cross_entropy", "log_softmax_fixed_dim",
                                "your log_softmax always normalises over dim={dim}, whatever `dim` says: normalise "
                                "over the dim given", dict())
FIXED_DIMS = (0, 1, -2)


def _fixed_dims(entry: Mistake, x: Tensor, fn: Callable[[Tensor, int], Tensor]) -> Mistakes:
    """Each fixed dim that x has (one that is x's last dim too is weighed: it rules out what it does not match)."""
    return {entry.text(dim=k): (lambda k=k: fn(x.double(), k)) for k in FIXED_DIMS if -x.dim() <= k < x.dim()}


# Families: the sum (the normaliser) taken over the whole tensor or without keepdim, whichever maximum is
# subtracted first (each shift its own member: right, none, the whole tensor's, one without keepdim).
SOFTMAX_GLOBAL_SUM = mistake("cross_entropy", "softmax_global_sum",
                             "your softmax divides by e.sum(), the sum of the whole tensor, with e = exp({shift}): "
                             "each row is divided by its own total, e.sum(dim=dim, keepdim=True)", dict())
SOFTMAX_SUM_WITHOUT_KEEPDIM = mistake("cross_entropy", "softmax_sum_without_keepdim",
                                      "your softmax divides by e.sum(dim) without keepdim=True, with e = exp({shift}), "
                                      "so the totals broadcast along the wrong dimension: e.sum(dim=dim, keepdim=True)",
                                      dict())
LOG_SOFTMAX_GLOBAL_SUM = mistake("cross_entropy", "log_softmax_global_sum",
                                 "your log_softmax subtracts log(e.sum()), the sum of the whole tensor, with e = "
                                 "exp({shift}): each row subtracts the log of its own total, "
                                 "sum(dim=dim, keepdim=True)", dict())
LOG_SOFTMAX_SUM_WITHOUT_KEEPDIM = mistake("cross_entropy", "log_softmax_sum_without_keepdim",
                                          "your log_softmax subtracts log(e.sum(dim)) (or logsumexp(dim)) without "
                                          "keepdim=True, with e = exp({shift}), so the totals broadcast along the "
                                          "wrong dimension: sum(dim=dim, keepdim=True)", dict())
LOG_SOFTMAX_MAX_WITHOUT_KEEPDIM = mistake("cross_entropy", "log_softmax_max_without_keepdim",
                                          "your log_softmax subtracts x.max(dim).values without keepdim=True, so the "
                                          "maxima broadcast along the wrong dimension: x.amax(dim=dim, keepdim=True)",
                                          lambda x, dim: _log_softmax_as(x, dim, "no_keepdim", "keepdim"))
SHIFTS_WRITTEN = {"keepdim": "x - x.amax(dim=dim, keepdim=True)", "none": "x", "global": "x - x.max()",
                  "no_keepdim": "x - x.max(dim).values"}


def _reduced(t: Tensor, dim: int, how: str, op: str) -> Tensor | float:
    """t reduced by `op` ("amax" or "sum") along dim with keepdim (`keepdim`), over the whole tensor (`global`),
    along dim without keepdim (`no_keepdim`), or not at all (`none`: 0)."""
    if how == "none":
        return 0.0
    return getattr(t, op)() if how == "global" else getattr(t, op)(dim=dim, keepdim=how == "keepdim")


def _softmax_as(x: Tensor, dim: int, shift: str, total: str) -> Tensor:
    e = torch.exp(x - _reduced(x, dim, shift, "amax"))
    return e / _reduced(e, dim, total, "sum")


def _log_softmax_as(x: Tensor, dim: int, shift: str, total: str) -> Tensor:
    shifted = x - _reduced(x, dim, shift, "amax")
    return shifted - torch.log(_reduced(torch.exp(shifted), dim, total, "sum"))


def _normaliser_family(x: Tensor, dim: int, log: bool) -> Mistakes:
    entries = (LOG_SOFTMAX_GLOBAL_SUM, LOG_SOFTMAX_SUM_WITHOUT_KEEPDIM) if log else \
        (SOFTMAX_GLOBAL_SUM, SOFTMAX_SUM_WITHOUT_KEEPDIM)
    fn = _log_softmax_as if log else _softmax_as
    return {entry.text(shift=written): (lambda shift=shift, total=total: fn(x, dim, shift, total))
            for entry, total in zip(entries, ("global", "no_keepdim")) for shift, written in SHIFTS_WRITTEN.items()
            if not (log and shift == "global")}  # a constant shift cancels in x - shift - log(sum(exp(x - shift)))


def softmax_mistakes(x: Tensor, dim: int, got: Any = None) -> Mistakes:
    """For softmax(x, dim) (which gave `got`); also a fixed dim of FIXED_DIMS, and a sum over the whole tensor or
    without keepdim."""
    family = {**_fixed_dims(SOFTMAX_FIXED_DIM, x, torch.softmax), **_normaliser_family(x, dim, log=False)}
    return besides(bind(SOFTMAX_MISTAKES, x, dim), family, got)


def log_softmax_mistakes(x: Tensor, dim: int, got: Any = None) -> Mistakes:
    """For log_softmax(x, dim) (which gave `got`); also a fixed dim of FIXED_DIMS, and a sum over the whole
    tensor or without keepdim."""
    family = {**_fixed_dims(LOG_SOFTMAX_FIXED_DIM, x, torch.log_softmax), **_normaliser_family(x, dim, log=True)}
    return besides(bind([*LOG_SOFTMAX_MISTAKES, LOG_SOFTMAX_MAX_WITHOUT_KEEPDIM], x, dim), family, got)


# A family: the sum of -log p[target] divided by another count than the kept targets' (all the targets, 1 and
# the kept targets are named entries).
CE_DENOMINATOR = mistake("cross_entropy", "denominator",
                         "your loss divides the sum of -log p[target] by {count}: it is the mean over the kept "
                         "targets, divided by (targets != ignore_index).sum()", dict())


def _denominators(c: _Targets) -> dict[str, int]:
    kept, v = int(c.keep.sum()), c.raw.shape[-1]
    counts = {"logits.size(-1)": v, "keep.sum() * logits.size(-1)": kept * v}
    if c.raw.dim() > 1:
        counts["logits.size(0)"] = c.raw.shape[0]
    if c.raw.dim() > 2:
        counts["logits.size(1)"] = c.raw.shape[1]
    return {text: n for text, n in counts.items() if n not in (kept, c.t.numel(), 1)}


def cross_entropy_mistakes(logits: Tensor, targets: Tensor, ignore_index: int) -> Mistakes:
    """For cross_entropy(logits, targets, ignore_index=...); also the sum divided by another count."""
    v = logits.shape[-1]
    flat, t = logits.double().reshape(-1, v), targets.reshape(-1)
    keep = t != ignore_index
    logp = torch.log_softmax(flat, -1)
    picked = logp[keep].gather(1, t[keep].unsqueeze(1)).squeeze(1)
    c = _Targets(flat, t, keep, logp, picked, ignore_index, logits.double())
    family = {CE_DENOMINATOR.text(count=text): (lambda n=n: -picked.sum() / n) for text, n in _denominators(c).items()}
    return besides(bind(CROSS_ENTROPY_MISTAKES, c), family)


CE_PYTHON_NUMBER = mistake(
    "cross_entropy", "python_number",
    "your cross_entropy returns a Python number holding the right loss (.item(), float(...) or math.log): return "
    "the 0-dim tensor itself, which the backward pass runs through",
    lambda got, want: got if isinstance(got, (float, int)) and not isinstance(got, bool)
    and abs(got - float(want)) <= 1e-4 * max(1.0, abs(float(want))) else None)


CE_DEFAULT_IGNORE_INDEX = recognised(
    "cross_entropy", "default_ignore_index",
    "your ignore_index defaults to another value than -100 (given as ignore_index=-100, your cross_entropy is "
    "right): the contract's default is PyTorch's, ignore_index=-100")
CE_GATHERED_IGNORED = recognised(
    "cross_entropy", "gathered_ignored",
    "your cross_entropy indexes log p with the ignored targets themselves (an ignore_index such as -100 is no "
    "class, so gather or indexing fails on it): drop the positions whose target is ignore_index first, then "
    "gather, logp[keep].gather(1, targets[keep].unsqueeze(1))")


def python_number_mistakes(got: Any, want: Tensor) -> Mistakes:
    """For what cross_entropy returned instead of a 0-dim tensor, the right loss being `want`."""
    return bind([CE_PYTHON_NUMBER], got, want)


def subtracted_in_place_mistakes(x: Tensor, dim: int = -1) -> Mistakes:
    return bind([MAX_SUBTRACTED_IN_PLACE], x, dim)
