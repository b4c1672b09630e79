"""The known mistakes of `rms_norm` (RMSNorm): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, fitted_besides
from .layer_norm import DEFAULT_EPS, NORM_AXES, PLAIN_TENSORS, fixed_eps_family, lower_precision_mistakes


RMS_NORM_BIAS = mistake("rms_norm", "has_bias",
                        "your RMSNorm has a bias; RMSNorm has only weight (no shift, as no mean is subtracted)",
                        lambda: {"weight", "bias"})
RMS_AXIS = mistake(
    "rms_norm", "mean_square_axis",
    "your mean square is taken over dim={dim} instead of the features: RMSNorm's is per position, over the "
    "last dimension (dim=-1, keepdim=True)", dict())


def rms_norm_axis_family(x: Tensor, state: dict[str, Tensor], eps: float) -> Mistakes:
    """RMS_AXIS: the mean square over dim=0, 1 or -2."""
    def model(dim: int) -> Tensor | None:
        if x.dim() < 2 or dim >= x.dim():
            return None
        xd = x.double()
        return xd / torch.sqrt(xd.pow(2).mean(dim=dim, keepdim=True) + eps) * state["weight"].double()
    return {RMS_AXIS.text(dim=dim): (lambda dim=dim: model(dim)) for dim in NORM_AXES}


def rms_norm(x: Tensor, weight: Tensor, eps: float, *, variant: str = "", power: float = -0.5,
             spread: bool | None = None) -> Tensor:
    """RMSNorm over the last dimension in float64, with the mistake `variant` switched on, or x scaled by
    (mean(x**2) + eps) ** `power` (a root or a mean square that multiplies), or (`spread`: unbiased or not)
    the mean square taken of x minus its mean, the variance, while x itself stays uncentred."""
    x, w = x.double(), weight.double()
    if power != -0.5 or spread is not None:
        ms = x.pow(2).mean(dim=-1, keepdim=True) if spread is None else x.var(dim=-1, keepdim=True, unbiased=spread)
        return x * (ms + eps) ** power * w
    if variant in ("weight_first", "weight_twice"):  # x scaled by weight, the result normalised
        x, w = x * w, (torch.ones_like(w) if variant == "weight_first" else w)
    if variant == "mean_subtracted":
        x = x - x.mean(dim=-1, keepdim=True)
    if variant == "no_eps":
        eps = 0.0
    if variant == "default_eps_1e-6":
        eps = 1e-6
    if variant == "global_mean":
        ms = x.pow(2).mean()
    elif variant in ("sum", "l2_norm"):
        ms = x.pow(2).sum(dim=-1, keepdim=True)
    elif variant == "abs_mean":
        ms = x.abs().mean(dim=-1, keepdim=True)
    elif variant == "square_of_mean":
        ms = x.mean(dim=-1, keepdim=True).pow(2)
    elif variant == "over_d_minus_1":
        ms = x.pow(2).sum(dim=-1, keepdim=True) / (x.shape[-1] - 1)
    elif variant == "norm_over_d":  # the root taken as ||x|| / D, squared back
        ms = x.pow(2).sum(dim=-1, keepdim=True) / x.shape[-1] ** 2
    else:
        ms = x.pow(2).mean(dim=-1, keepdim=True)
    if variant == "abs_mean":
        out = x / (ms + eps)
    elif variant in ("eps_outside_sqrt", "l2_norm"):
        out = x / (torch.sqrt(ms) + eps)
    elif variant == "no_sqrt":
        out = x / (ms + eps)
    elif variant == "half_power":
        out = x / (2 * (ms + eps))
    elif variant == "eps_added_after":
        out = x / torch.sqrt(ms) + eps
    else:
        out = x / torch.sqrt(ms + eps)
    if variant == "one_plus_weight":
        return out * (1 + w)
    if variant == "weight_added":
        return out + w
    return out if variant == "no_weight" else out * w


RMS_NORM_MISTAKES = variants("rms_norm", (
    ("your RMSNorm subtracts the mean first (that is LayerNorm without its bias); RMSNorm divides x itself "
     "by sqrt(mean(x**2) + eps)", "mean_subtracted"),
    ("your eps is added after the square root, x / (sqrt(mean(x**2)) + eps); it belongs inside: "
     "rsqrt(mean(x**2) + eps)", "eps_outside_sqrt"),
    ("your RMSNorm ignores eps, which divides by zero on an all-zero row", "no_eps"),
    ("your RMSNorm divides by the L2 norm plus eps, x.norm(dim=-1) + eps, which is √D times the root mean square: "
     "divide by sqrt(mean(x**2) + eps)", "l2_norm"),
    ("your RMSNorm divides by mean(x**2) + eps, not by its square root", "no_sqrt"),
    ("your mean square divides the sum of squares by D - 1: it is the mean, divided by D (x.pow(2).mean(-1))",
     "over_d_minus_1"),
    ("your root mean square is ||x|| / D: the mean divides the sum of squares by D, so the root is ||x|| / √D, "
     "sqrt(mean(x**2))", "norm_over_d"),
    ("your eps is added to the normalised x, x / sqrt(mean(x**2)) + eps; it belongs under the square root: "
     "x / sqrt(mean(x**2) + eps)", "eps_added_after"),
    ("your RMSNorm sums the squares instead of averaging them (that is the L2 norm): use mean(x**2)", "sum"),
    ("your mean square is taken over the whole tensor; RMSNorm takes it per position, over the last "
     "dimension only (dim=-1, keepdim=True)", "global_mean"),
    ("your RMSNorm never multiplies by weight", "no_weight"),
    ("your RMSNorm divides by the mean absolute value; it is the root of the mean of the squares", "abs_mean"),
    ("your RMSNorm squares the mean (mean(x)**2); it is the mean of the squares, mean(x**2)", "square_of_mean"),
    ("your RMSNorm scales by (1 + weight), Gemma's convention for a weight that starts at 0: here weight starts "
     "at 1 and scales directly, x / sqrt(mean(x**2) + eps) * weight", "one_plus_weight"),
    ("your RMSNorm adds weight to the normalised x; it multiplies: x / sqrt(mean(x**2) + eps) * weight",
     "weight_added"),
    ("your RMSNorm multiplies x by weight before it normalises, so the normalisation undoes the weight: "
     "normalise first, then scale, x / sqrt(mean(x**2) + eps) * weight", "weight_first"),
    ("your RMSNorm multiplies by weight twice, x before it normalises and the result again: only after, "
     "x / sqrt(mean(x**2) + eps) * weight", "weight_twice"),
    ("your RMSNorm scales x by 1 / (2 (mean(x**2) + eps)): Python reads m ** -1 / 2 as (m ** -1) / 2, and "
     "x / m ** 1 / 2 as x / m / 2 (** binds tighter than /); the root is ** -0.5, ** (-1 / 2) or torch.rsqrt",
     "half_power"),
))


SCALED_IN_PLACE = mistake("rms_norm", "scaled_in_place",
                          "your RMSNorm scaled the caller's x in place (x *= ... or x.mul_): compute a new tensor",
                          lambda x: x.double() * torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + 1e-5))


RMS_WITHOUT_KEEPDIM = recognised("rms_norm", "without_keepdim",
                                 "your mean square loses its last dim (mean(dim=-1) without keepdim=True), so the (...,) "
                                 "result broadcasts against the wrong dimension of x: x.pow(2).mean(dim=-1, "
                                 "keepdim=True), (..., 1)")


def scaled_in_place_mistakes(x: Tensor) -> Mistakes:
    """For x after RMSNorm(d, eps=1e-5)(x)."""
    return bind([SCALED_IN_PLACE], x)


# Families: the normaliser multiplying where it divides (x / torch.rsqrt(m) is x * sqrt(m)); the mean square
# taken around the mean, the variance, while x itself is not centred (mean_subtracted centres both).
RMS_FACTOR_INVERTED = mistake(
    "rms_norm", "factor_inverted",
    "your RMSNorm multiplies x by {factor} instead of dividing by sqrt(mean(x**2) + eps) (x / torch.rsqrt(m) is "
    "x * sqrt(m): rsqrt is already 1 / sqrt): x * torch.rsqrt(mean(x**2) + eps) * weight, or x / torch.sqrt(...)",
    dict())
RMS_FACTORS = {"sqrt(mean(x**2) + eps)": 0.5, "mean(x**2) + eps": 1.0}
RMS_OF_SPREAD = mistake(
    "rms_norm", "variance_denominator",
    "your RMSNorm divides x by sqrt({variance} + eps), the spread of x around its mean (the mean is subtracted "
    "inside the mean square only): RMSNorm's denominator is the root mean square of x itself, "
    "sqrt(mean(x**2) + eps), with no mean subtracted anywhere", dict())
RMS_SPREADS = {"mean((x - mean(x))**2)": False, "x.var(dim=-1)": True}


def rms_norm_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, *, default_eps: bool = False,
                      got: Any = None) -> Mistakes:
    """For RMSNorm(x) with this eps (which gave `got`); also an eps of FIXED_EPS_VALUES written into the code,
    the normaliser multiplying (RMS_FACTORS) and the variance for the mean square (RMS_SPREADS)."""
    entries = list(RMS_NORM_MISTAKES)
    if bool((x > 0).all()):  # mean(|x|) is mean(x) there: the two mistakes cannot be told apart
        entries = [m for m in entries if m.model["variant"] not in ("abs_mean", "square_of_mean")]
    if default_eps:
        entries.append(DEFAULT_EPS)
    family = {RMS_FACTOR_INVERTED.text(factor=text): (lambda p=p: rms_norm(x, state["weight"], eps, power=p))
              for text, p in RMS_FACTORS.items()}
    family.update({RMS_OF_SPREAD.text(variance=text): (lambda u=u: rms_norm(x, state["weight"], eps, spread=u))
                   for text, u in RMS_SPREADS.items()})
    family.update(rms_norm_axis_family(x, state, eps))
    named = besides(simulated(entries, lambda variant: rms_norm(x, state["weight"], eps, variant=variant)), family)
    precision = lower_precision_mistakes(
        "RMSNorm", lambda dtype: F.rms_norm(x.to(dtype), x.shape[-1:], state["weight"].to(dtype), eps), x, got)
    fixed = fixed_eps_family(lambda value: rms_norm(x, state["weight"], value), {}, got, default_eps)
    return {**fixed_eps_family(lambda value: rms_norm(x, state["weight"], value), named, got, default_eps),
            **fitted_besides({**named, **fixed}, precision, got)}


def norm_state_mistakes(keys: set[str]) -> Mistakes:
    """For the set of state-dict keys of an RMSNorm (layer_norm.PLAIN_TENSORS: a norm's own, shared)."""
    return {**bind([PLAIN_TENSORS], name="RMSNorm"), **bind([RMS_NORM_BIAS])}
