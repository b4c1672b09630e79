"""The known mistakes of `layer_norm` (LayerNorm): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, fitted_besides


LAYER_NORM_WITHOUT_KEEPDIM = recognised("layer_norm", "without_keepdim",
                                        "your mean or variance loses its last dim (mean(dim=-1) without keepdim=True), "
                                        "so the (...,) result broadcasts against the wrong dimension of x: take both "
                                        "with keepdim=True, (..., 1)")


UNSHIELDED_SQRT = ("no_eps", "unbiased_no_eps", "eps_outside_sqrt", "std_plus_eps")  # sqrt(var) alone


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float, *, variant: str = "") -> Tensor | None:
    """LayerNorm over the last dimension in float64, with the mistake `variant` switched on.

    `naive_variance` is computed in x's own dtype: its error is float32's cancellation in E[x²] - E[x]². None
    for a variant without eps under the square root on a float32 x with a constant row: there float32's rounding
    of the variance (0 or not) decides the result (NaN, or noise over a tiny denominator), which float64 cannot
    reproduce.
    """
    if x.dtype == torch.float32 and variant in UNSHIELDED_SQRT and bool((x == x[..., :1]).all(dim=-1).any()):
        return None
    if variant == "naive_variance":
        w, b = weight.to(x.dtype), bias.to(x.dtype)
        mean = x.mean(dim=-1, keepdim=True)
        var = (x * x).mean(dim=-1, keepdim=True) - mean * mean
        return ((x - mean) / torch.sqrt(var + eps) * w + b).double()
    x, w, b = x.double(), weight.double(), bias.double()
    if variant in ("affine_first", "affine_twice"):  # weight and bias applied to x, the result normalised
        x = x * w + b
        if variant == "affine_first":
            w, b = torch.ones_like(w), torch.zeros_like(b)
    if variant in ("mean_over_dim0", "mean_over_dim1", "global_mean_only"):  # the mean over other axes, the
        # variance around it, over the features
        mean = x.mean() if variant == "global_mean_only" else x.mean(dim=int(variant[-1]), keepdim=True)
        return (x - mean) / torch.sqrt((x - mean).pow(2).mean(dim=-1, keepdim=True) + eps) * w + b
    dims = {"global_statistics": tuple(range(x.dim())),
            "per_sample_statistics": tuple(range(1, x.dim())) or (-1,)}.get(variant, (-1,))
    mean = x.mean(dim=dims, keepdim=True)
    var = x.var(dim=dims, keepdim=True, unbiased=variant in ("unbiased", "std_plus_eps", "unbiased_no_eps"))
    if variant == "std_plus_eps":
        variant = "eps_outside_sqrt"
    elif variant == "unbiased_no_eps":
        variant = "no_eps"
    if variant == "rms_denominator":
        var = x.pow(2).mean(dim=-1, keepdim=True)
    if variant == "no_eps":
        eps = 0.0
    if variant == "default_eps_1e-6":
        eps = 1e-6
    denominator = torch.sqrt(var) + eps if variant == "eps_outside_sqrt" else (
        var + eps if variant == "no_sqrt" else 2 * (var + eps) if variant == "half_power" else torch.sqrt(var + eps))
    normed = (x - mean) / denominator
    if variant == "no_mean":
        normed = x / denominator
    if variant == "weight_bias_swapped":
        return normed * b + w
    if variant == "no_bias":
        return normed * w
    if variant == "no_weight":
        return normed + b
    if variant == "one_plus_weight":
        return normed * (1 + w) + b
    if variant == "bias_before_weight":
        return (normed + b) * w
    return normed * w + b


LAYER_NORM_MISTAKES = variants("layer_norm", (
    ("your variance is the unbiased one (divides by D - 1, torch.var's default); LayerNorm's is biased: "
     "the mean of (x - mean)**2, torch.var(..., unbiased=False)", "unbiased"),
    ("your eps is added after the square root, (x - mean) / (sqrt(var) + eps); it belongs inside: "
     "sqrt(var + eps)", "eps_outside_sqrt"),
    ("your LayerNorm ignores eps: (x - mean) / sqrt(var), which divides by zero on a constant row", "no_eps"),
    ("your LayerNorm divides by var + eps, not by its square root", "no_sqrt"),
    ("your mean and variance are taken over the whole tensor; LayerNorm takes them per position, "
     "over the last dimension only (dim=-1, keepdim=True)", "global_statistics"),
    ("your mean and variance are taken per sample, over every dimension but the first (as "
     "nn.LayerNorm(x.shape[1:]) would): LayerNorm takes them per position, over the last dimension only "
     "(dim=-1, keepdim=True)", "per_sample_statistics"),
    ("your mean is taken over dimension 0 instead of the features: LayerNorm's statistics are per position, "
     "over the last dimension (dim=-1, keepdim=True)", "mean_over_dim0"),
    ("your mean is taken over dimension 1 instead of the features: LayerNorm's statistics are per position, "
     "over the last dimension (dim=-1, keepdim=True)", "mean_over_dim1"),
    ("your mean is taken over the whole tensor (x.mean(), no dim) while the variance is per position: both "
     "statistics are per position, over the last dimension (dim=-1, keepdim=True)", "global_mean_only"),
    ("your LayerNorm multiplies by bias and adds weight: it is * weight + bias", "weight_bias_swapped"),
    ("your LayerNorm never adds bias", "no_bias"),
    ("your LayerNorm adds bias before it multiplies by weight, (normed + bias) * weight: the weight scales "
     "the normalised x, then the bias shifts it, normed * weight + bias", "bias_before_weight"),
    ("your LayerNorm never multiplies by weight", "no_weight"),
    ("your LayerNorm divides by the root mean square of x, not by its standard deviation: the variance is "
     "the mean of (x - mean)**2, not of x**2", "rms_denominator"),
    ("your LayerNorm does not subtract the mean: (x - mean) / sqrt(var + eps)", "no_mean"),
    ("your LayerNorm divides by x.std() + eps: torch's std is the unbiased one (D - 1) and eps belongs under the "
     "square root; it is (x - mean) / sqrt(var + eps), var the biased variance, x.var(dim=-1, unbiased=False)",
     "std_plus_eps"),
    ("your LayerNorm divides by the unbiased standard deviation without eps: it is (x - mean) / sqrt(var + eps), "
     "var the biased variance, x.var(dim=-1, unbiased=False)", "unbiased_no_eps"),
    ("your LayerNorm scales by (1 + weight), Gemma's convention for a weight that starts at 0: here weight starts "
     "at 1 and scales directly, (x - mean) / sqrt(var + eps) * weight + bias", "one_plus_weight"),
    ("your variance is E[x²] - E[x]², which cancels catastrophically in float32 when the inputs sit far "
     "from zero: average the squared deviations (x - mean)**2 instead", "naive_variance"),
    ("your LayerNorm applies weight and bias to x before it normalises, so the normalisation undoes them: "
     "normalise first, then scale and shift, (x - mean) / sqrt(var + eps) * weight + bias", "affine_first"),
    ("your LayerNorm applies weight and bias twice, to x before it normalises and again after: only after, "
     "(x - mean) / sqrt(var + eps) * weight + bias", "affine_twice"),
    ("your LayerNorm divides by 2 (var + eps): Python reads (var + eps) ** 1 / 2 as ((var + eps) ** 1) / 2 "
     "(** binds tighter than /); the square root is ** 0.5, ** (1 / 2) or torch.sqrt", "half_power"),
))
# a switch of both layer_norm() and rms_norm(): the checks of either component see it
DEFAULT_EPS = mistake("layer_norm", "default_eps_1e-6",
                      "your default eps is 1e-6; the contract's (and nn.LayerNorm's, nn.RMSNorm's here) is 1e-5",
                      dict(variant="default_eps_1e-6"))
STATISTICS_DETACHED = mistake(
    "layer_norm", "statistics_detached",
    "your {what} detached from the graph (.detach(), torch.no_grad() or .item()): the forward is "
    "right, but the gradient must flow through the statistics too",
    lambda x, state, eps, grad_output, rms: statistics_detached_x_grad(x, state, eps, grad_output, rms=rms))
MEAN_DETACHED = mistake(
    "layer_norm", "mean_detached",
    "your mean is detached from the graph (.detach(), torch.no_grad() or .item()): the forward is "
    "right, but the gradient must flow through the mean too",
    lambda x, state, eps, grad_output: statistics_detached_x_grad(x, state, eps, grad_output, mean_only=True))
CENTRED_IN_PLACE = mistake("layer_norm", "centred_in_place",
                           "your LayerNorm subtracted the mean from the caller's x in place (x -= mean or x.sub_): "
                           "compute x - mean as a new tensor",
                           lambda x: x.double() - x.double().mean(dim=-1, keepdim=True))
PLAIN_TENSORS = mistake("layer_norm", "parameters_plain_tensors",
                        "your {name}'s parameters are plain tensors (or not created): wrap them in nn.Parameter "
                        "so that they are trained and saved", lambda: set())
NO_BIAS_PARAMETER = mistake("layer_norm", "no_bias_parameter",
                            "your LayerNorm has no bias parameter: it needs both weight (ones) and bias (zeros)",
                            lambda: {"weight"})
INITIAL_VALUE = mistake("layer_norm", "initial_value",
                        "your {name} starts at {bad:g}s; it starts at {good:g}s, so that a fresh norm only normalises",
                        lambda d, bad: torch.full((d,), bad))


# A family of both norms: an eps written into the code, whatever eps the norm is given.
FIXED_EPS = mistake("layer_norm", "fixed_eps",
                    "your eps is {eps} whatever eps the norm is given: use the one passed to __init__ (self.eps)",
                    dict())
FIXED_EPS_VALUES = (1e-5, 1e-6, 1e-8, 1e-3)


def fixed_eps_family(norm: Callable[[float], Tensor], named: Mistakes, got: Any, default_eps: bool) -> Mistakes:
    """`named` and the FIXED_EPS family; 1e-6 is DEFAULT_EPS's where the default is used. An eps next to 0 is
    no eps on most inputs: where the two give the same, neither is named."""
    family = {FIXED_EPS.text(eps=f"{value:g}".replace("e-0", "e-")): (lambda value=value: norm(value))
              for value in FIXED_EPS_VALUES if not (default_eps and value == 1e-6)}
    return besides(named, family, got, prefer_named=False)


# A family of both norms: a statistic reduced over another axis than the features, as written in the code
# (dim=0, dim=1, dim=-2; keepdim kept). A dim that the input lacks says nothing; where two dims are the same
# axis (dim=1 and dim=-2 of a 3-d input) both are weighed, and the other cases tell them apart.
NORM_AXES = (0, 1, -2)
LN_VARIANCE_AXIS = mistake(
    "layer_norm", "variance_axis",
    "your variance is taken over dim={dim} while the mean is over the features: both statistics are per "
    "position, over the last dimension (dim=-1, keepdim=True)", dict())
LN_STATISTICS_AXIS = mistake(
    "layer_norm", "statistics_axis",
    "your mean and variance are taken over dim={dim} instead of the features: LayerNorm's statistics are per "
    "position, over the last dimension (dim=-1, keepdim=True)", dict())
LN_MEAN_AXIS = mistake(
    "layer_norm", "mean_axis",
    "your mean is taken over dim={dim} instead of the features: LayerNorm's statistics are per position, "
    "over the last dimension (dim=-1, keepdim=True)", dict())


def _axis_layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float, mean_dim: int, var_dim: int
                     ) -> Tensor | None:
    """LayerNorm in float64 with its mean over `mean_dim` and the variance (around that mean) over `var_dim`;
    None where x lacks one of those dims."""
    if x.dim() < 2 or max(mean_dim, var_dim) >= x.dim():
        return None
    x = x.double()
    mean = x.mean(dim=mean_dim, keepdim=True)
    var = (x - mean).pow(2).mean(dim=var_dim, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight.double() + bias.double()


def layer_norm_axis_family(x: Tensor, state: dict[str, Tensor], eps: float) -> Mistakes:
    """LN_VARIANCE_AXIS, LN_STATISTICS_AXIS and LN_MEAN_AXIS (dim=-2 only: mean_over_dim0/1 name the others)."""
    w, b = state["weight"], state["bias"]
    family: Mistakes = {}
    for dim in NORM_AXES:
        family[LN_VARIANCE_AXIS.text(dim=dim)] = lambda dim=dim: _axis_layer_norm(x, w, b, eps, -1, dim)
        family[LN_STATISTICS_AXIS.text(dim=dim)] = lambda dim=dim: _axis_layer_norm(x, w, b, eps, dim, dim)
    family[LN_MEAN_AXIS.text(dim=-2)] = lambda: _axis_layer_norm(x, w, b, eps, -2, -1)
    return family


def layer_norm_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, *, default_eps: bool = False,
                        got: Any = None) -> Mistakes:
    """For LayerNorm(x) with this eps (which gave `got`); also an eps of FIXED_EPS_VALUES written into the code
    and a statistic over another axis (layer_norm_axis_family)."""
    named = besides(simulated([*LAYER_NORM_MISTAKES, *([DEFAULT_EPS] if default_eps else [])],
                              lambda variant: layer_norm(x, state["weight"], state["bias"], eps, variant=variant)),
                    layer_norm_axis_family(x, state, eps), got)
    precision = lower_precision_mistakes(
        "LayerNorm", lambda dtype: F.layer_norm(x.to(dtype), x.shape[-1:], state["weight"].to(dtype),
                                                state["bias"].to(dtype), eps), x, got)
    fixed = fixed_eps_family(lambda value: layer_norm(x, state["weight"], state["bias"], value), {}, got, default_eps)
    return {**fixed_eps_family(lambda value: layer_norm(x, state["weight"], state["bias"], value), named, got, default_eps),
            **fitted_besides({**named, **fixed}, precision, got)}


def statistics_detached_x_grad(x: Tensor, state: dict[str, Tensor], eps: float, grad_output: Tensor, *,
                               rms: bool = False, mean_only: bool = False) -> Tensor:
    """d/dx of sum(norm(x) * grad_output) when the mean and variance (or mean square) are detached,
    or (`mean_only`) the mean alone, the variance being taken around the detached mean."""
    x = x.double().clone().requires_grad_(True)
    w = state["weight"].double()
    if rms:
        out = x * torch.rsqrt(x.detach().pow(2).mean(dim=-1, keepdim=True) + eps) * w
    else:
        mean = x.detach().mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True) if mean_only else \
            x.detach().var(dim=-1, keepdim=True, unbiased=False)
        out = (x - mean) / torch.sqrt(var + eps) * w + state["bias"].double()
    (out * grad_output.double()).sum().backward()
    return x.grad


def detached_statistics_mistakes(x: Tensor, state: dict[str, Tensor], eps: float, grad_output: Tensor, *,
                                 rms: bool = False) -> Mistakes:
    mistakes = bind([STATISTICS_DETACHED], x, state, eps, grad_output, rms,
                    what="mean square is" if rms else "mean and variance are")
    if not rms:
        mistakes.update(bind([MEAN_DETACHED], x, state, eps, grad_output))
    return mistakes


def centred_in_place_mistakes(x: Tensor) -> Mistakes:
    return bind([CENTRED_IN_PLACE], x)


def norm_state_mistakes(keys: set[str]) -> Mistakes:
    """For the set of state-dict keys of a LayerNorm (rms_norm.norm_state_mistakes: of an RMSNorm)."""
    return {**bind([PLAIN_TENSORS], name="LayerNorm"), **bind([NO_BIAS_PARAMETER])}


def initial_value_mistakes(d: int, name: str) -> Mistakes:
    good = 1.0 if name == "weight" else 0.0
    return bind([INITIAL_VALUE], d, 1.0 - good, name=name, bad=1.0 - good, good=good)


LOWER_PRECISION = mistake("layer_norm", "lower_precision",
                          "your {name} computes in float32 for a float64 input (an x.float() kept to the end, or a "
                          "float32 tensor made inside) and returns float32: cast the result back with .type_as(x) "
                          "(computing in float32 and casting back, as LLaMA's code does, is fine), or compute in "
                          "x's dtype", dict())


def lower_precision_mistakes(name: str, compute: Callable[[torch.dtype], Tensor], x: Tensor, got: Any) -> Mistakes:
    """For a float64 case of a computation (`compute(dtype)`: the right result computed in that dtype) that gave
    `got`, not float64: the float32 computation's result. Nothing for other inputs, or a float64 result (a float32
    computation cast back is correct, within the contract's tolerance). A fit: bind it with `besides`, so that a
    mistake modelled exactly speaks where it gives what came back."""
    def model() -> Tensor | None:
        if x.dtype != torch.float64 or not isinstance(got, Tensor) or not got.is_floating_point() or \
                got.dtype == torch.float64:
            return None
        return compute(torch.float32).detach()
    return {LOWER_PRECISION.text(name=name): model}
