from . import Bug

RMS_FORWARD = """        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)
        return x * torch.rsqrt(ms + self.eps) * self.weight"""
RMS_MS = "ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)"
RMS_INIT_END = "        self.weight = nn.Parameter(torch.ones(d_model))\n\n    def forward(self, x: Tensor) -> Tensor:\n"
RMS_RETURN = "return x * torch.rsqrt(ms + self.eps) * self.weight"

BUGS = [
    Bug("rms_norm", "mean_subtracted", "norms.py", RMS_FORWARD,
        """        x = x - x.mean(dim=-1, keepdim=True)
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps) * self.weight""",
        "centres x first, as LayerNorm does",
        diagnosis=("rms_norm:mean_subtracted",)),
    Bug("rms_norm", "eps_outside_sqrt", "norms.py", RMS_RETURN,
        "return x / (torch.sqrt(ms) + self.eps) * self.weight",
        "adds eps after the square root instead of inside it",
        diagnosis=("rms_norm:eps_outside_sqrt",)),
    Bug("rms_norm", "eps_ignored", "norms.py", RMS_RETURN,
        "return x * torch.rsqrt(ms) * self.weight",
        "stores eps but never uses it",
        diagnosis=("rms_norm:no_eps",)),
    Bug("rms_norm", "no_sqrt", "norms.py", RMS_RETURN,
        "return x / (ms + self.eps) * self.weight",
        "divides by the mean square instead of its root",
        diagnosis=("rms_norm:no_sqrt",)),
    Bug("rms_norm", "sum_of_squares", "norms.py", RMS_MS,
        "ms = x.pow(2).sum(dim=-1, keepdim=True)",
        "sums the squares instead of averaging them",
        diagnosis=("rms_norm:sum",)),
    Bug("rms_norm", "global_mean_square", "norms.py", RMS_MS,
        "ms = x.pow(2).mean()",
        "averages the squares over the whole tensor instead of over the last dimension",
        diagnosis=("rms_norm:global_mean",)),
    Bug("rms_norm", "no_weight", "norms.py", RMS_RETURN,
        "return x * torch.rsqrt(ms + self.eps)",
        "creates weight but never multiplies by it",
        diagnosis=("rms_norm:no_weight",)),
    Bug("rms_norm", "mean_absolute_value", "norms.py", RMS_FORWARD,
        "        return x / (x.abs().mean(dim=-1, keepdim=True) + self.eps) * self.weight",
        "divides by the mean absolute value instead of the root mean square",
        diagnosis=("rms_norm:abs_mean",)),
    Bug("rms_norm", "square_of_mean", "norms.py", RMS_MS,
        "ms = x.mean(dim=-1, keepdim=True).pow(2)",
        "squares the mean instead of averaging the squares",
        diagnosis=("rms_norm:square_of_mean",)),
    Bug("rms_norm", "llama_default_eps", "norms.py",
        "class RMSNorm(nn.Module):\n    \"\"\"x / sqrt(mean(x**2) + eps) * weight over the last dimension; (..., D) -> (..., D).\"\"\"\n\n"
        "    def __init__(self, d_model: int, eps: float = 1e-5) -> None:",
        "class RMSNorm(nn.Module):\n    \"\"\"x / sqrt(mean(x**2) + eps) * weight over the last dimension; (..., D) -> (..., D).\"\"\"\n\n"
        "    def __init__(self, d_model: int, eps: float = 1e-6) -> None:",
        "copies LLaMA's default eps, 1e-6, where the contract's is 1e-5",
        diagnosis=("layer_norm:default_eps_1e-6",)),
    Bug("rms_norm", "with_bias", "norms.py", RMS_INIT_END + RMS_FORWARD,
        RMS_INIT_END.replace("\n\n", "\n        self.bias = nn.Parameter(torch.zeros(d_model))\n\n", 1)
        + RMS_FORWARD + " + self.bias",
        "adds a LayerNorm-style bias parameter",
        diagnosis=("rms_norm:has_bias",)),
    Bug("rms_norm", "weight_starts_at_zeros", "norms.py",
        "self.weight = nn.Parameter(torch.ones(d_model))\n\n    def forward(self, x: Tensor) -> Tensor:\n        ms",
        "self.weight = nn.Parameter(torch.zeros(d_model))\n\n    def forward(self, x: Tensor) -> Tensor:\n        ms",
        "initialises weight to zeros, so a fresh layer outputs zeros",
        diagnosis=("layer_norm:initial_value",)),
    Bug("rms_norm", "detached_mean_square", "norms.py", RMS_MS,
        "ms = x.detach().pow(2).mean(dim=-1, keepdim=True)",
        "detaches the mean square, so the gradient w.r.t. x is wrong",
        diagnosis=("layer_norm:statistics_detached",)),
    Bug("rms_norm", "library_rms_norm", "norms.py", RMS_FORWARD,
        "        return torch.nn.functional.rms_norm(x, x.shape[-1:], self.weight, self.eps)",
        "calls F.rms_norm instead of writing it",
        named_by="must be written from scratch"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("rms_norm", "eps_added_to_output", "norms.py", "return x * torch.rsqrt(ms + self.eps) * self.weight",
        "return (x * torch.rsqrt(ms) + self.eps) * self.weight",
        "adds eps to the normalised x instead of under the root",
        diagnosis=("rms_norm:eps_added_after",)),
]

BUGS += [
    Bug("rms_norm", "mean_square_over_d_minus_1", "norms.py",
        "ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)",
        "ms = x.pow(2).sum(dim=-1, keepdim=True) / (x.size(-1) - 1)  # (..., 1)",
        "divides the sum of squares by D - 1, as an unbiased variance would",
        diagnosis=("rms_norm:over_d_minus_1",)),
]

# A member of the fitted eps family (mistakes.layer_norm.FIXED_EPS) that no single entry names.
BUGS += [
    Bug("rms_norm", "eps_written_in", "norms.py", RMS_RETURN, "return x * torch.rsqrt(ms + 1e-8) * self.weight",
        "writes Adam's habitual 1e-8 into the formula instead of using self.eps",
        diagnosis=("layer_norm:fixed_eps",)),
]

# The weight used in another form, and a computation in float32 (mistakes: the one_plus_weight and weight_added
# variants, LOWER_PRECISION): held-out set 8's gemma_one_plus_weight, and a float32 result (LLaMA's upcast cast back
# with type_as(x) is correct: selftests/alternatives/llama_float32).
BUGS += [
    Bug("rms_norm", "gemma_one_plus_weight", "norms.py", RMS_RETURN, "return x * torch.rsqrt(ms + self.eps) * (1 + self.weight)",
        "Gemma's convention ported into a LLaMA RMSNorm: scales by (1 + weight)",
        diagnosis=("rms_norm:one_plus_weight",)),
    Bug("rms_norm", "weight_added", "norms.py", RMS_RETURN, "return x * torch.rsqrt(ms + self.eps) + self.weight",
        "adds weight to the normalised x instead of multiplying", diagnosis=("rms_norm:weight_added",)),
    Bug("rms_norm", "float32_output", "norms.py", RMS_RETURN,
        "return (x.float() * torch.rsqrt(ms.float() + self.eps) * self.weight.float())",
        "casts to float32 for the multiplication and returns float32 whatever the input",
        diagnosis=("layer_norm:lower_precision", "general:float_dtype_changed")),
]

# A statistic without keepdim=True, named from torch's broadcasting error (mistakes.keepdim_lost).
BUGS += [
    Bug("rms_norm", "mean_square_without_keepdim", "norms.py", RMS_MS, "ms = x.pow(2).mean(dim=-1)  # (...)",
        "takes the mean square without keepdim=True", diagnosis=("rms_norm:without_keepdim",)),
]

# The normaliser multiplying where it divides, and the variance for the mean square with x left uncentred
# (mistakes.RMS_FACTOR_INVERTED, RMS_OF_SPREAD): held-out set 10's divide_by_rsqrt and subtract_mean, and a sibling each.
BUGS += [
    Bug("rms_norm", "divided_by_rsqrt", "norms.py", RMS_RETURN, "return x / torch.rsqrt(ms + self.eps) * self.weight",
        "divides by rsqrt instead of multiplying by it, so x is scaled by the root mean square",
        diagnosis=("rms_norm:factor_inverted",)),
    Bug("rms_norm", "times_mean_square", "norms.py", RMS_RETURN, "return x * (ms + self.eps) * self.weight",
        "multiplies by the mean square where it divides by its root",
        diagnosis=("rms_norm:factor_inverted",)),
    Bug("rms_norm", "centred_mean_square", "norms.py", RMS_MS,
        "ms = (x - x.mean(dim=-1, keepdim=True)).pow(2).mean(dim=-1, keepdim=True)  # (..., 1)",
        "subtracts the mean inside the mean square only, so it divides x by its standard deviation",
        diagnosis=("rms_norm:variance_denominator",)),
    Bug("rms_norm", "unbiased_variance_mean_square", "norms.py", RMS_MS, "ms = x.var(dim=-1, keepdim=True)  # (..., 1)",
        "takes torch.var (unbiased, around the mean) for the mean square",
        diagnosis=("rms_norm:variance_denominator",)),
    Bug("rms_norm", "l2_norm_plus_eps", "norms.py",
        "return x * torch.rsqrt(ms + self.eps) * self.weight",
        "return x / (x.norm(dim=-1, keepdim=True) + self.eps) * self.weight",
        "divides by the L2 norm (plus eps) where the root mean square belongs",
        diagnosis=("rms_norm:l2_norm",)),
    Bug("rms_norm", "mean_square_over_dim_minus_2", "norms.py", RMS_MS,
        "ms = x.pow(2).mean(dim=-2, keepdim=True)  # (..., 1)",
        "averages the squares over the sequence axis (dim=-2) instead of the features",
        diagnosis=("rms_norm:mean_square_axis",)),
    Bug("rms_norm", "mean_square_over_first_dim", "norms.py", RMS_MS,
        "ms = x.pow(2).mean(dim=0, keepdim=True)  # (..., 1)",
        "averages the squares over the batch axis (dim=0) instead of the features",
        diagnosis=("rms_norm:mean_square_axis",)),
    Bug("rms_norm", "weight_before_normalising", "norms.py", RMS_FORWARD,
        """        x = self.weight * x
        ms = x.pow(2).mean(dim=-1, keepdim=True)
        return x * torch.rsqrt(ms + self.eps)""",
        "scales x by weight first, then normalises the result",
        diagnosis=("rms_norm:weight_first",)),
    Bug("rms_norm", "weight_twice", "norms.py", RMS_MS,
        "x = x * self.weight\n        ms = x.pow(2).mean(dim=-1, keepdim=True)",
        "multiplies x by weight at the start as well as at the end",
        diagnosis=("rms_norm:weight_twice",)),
    Bug("rms_norm", "half_power_precedence", "norms.py", RMS_RETURN,
        "return x * (ms + self.eps) ** -1 / 2 * self.weight",
        "writes the inverse square root as ** -1 / 2, which Python reads as (** -1) / 2",
        diagnosis=("rms_norm:half_power",)),
    Bug("rms_norm", "half_power_under_division", "norms.py", RMS_RETURN,
        "return x / (ms + self.eps) ** 1 / 2 * self.weight",
        "divides by the root written ** 1 / 2, which Python reads as (** 1) / 2",
        diagnosis=("rms_norm:half_power",)),
    # Held-out set 16's norm_over_d_not_sqrt_d: the root mean square as the L2 norm over D.
    Bug("rms_norm", "norm_over_d", "norms.py", "        ms = x.pow(2).mean(dim=-1, keepdim=True)  # (..., 1)",
        "        ms = (torch.linalg.vector_norm(x, dim=-1, keepdim=True) / x.size(-1)).pow(2)",
        "takes the root mean square as ||x|| / D instead of ||x|| / sqrt(D)",
        diagnosis=("rms_norm:norm_over_d",)),
]
