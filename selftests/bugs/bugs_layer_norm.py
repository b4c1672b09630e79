from . import Bug

LN_FORWARD = """        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"""
LN_VAR = "var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased"
LN_RETURN = "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"

BUGS = [
    Bug("layer_norm", "unbiased_variance", "norms.py", LN_VAR,
        "var = x.var(dim=-1, keepdim=True)",
        "uses torch.var's default, the unbiased variance (divides by D - 1)",
        diagnosis=("layer_norm:unbiased",)),
    Bug("layer_norm", "eps_outside_sqrt", "norms.py", LN_RETURN,
        "return (x - mean) / (torch.sqrt(var) + self.eps) * self.weight + self.bias",
        "adds eps after the square root instead of inside it",
        diagnosis=("layer_norm:eps_outside_sqrt",)),
    Bug("layer_norm", "eps_ignored", "norms.py", LN_RETURN,
        "return (x - mean) / torch.sqrt(var) * self.weight + self.bias",
        "stores eps but never uses it",
        diagnosis=("layer_norm:no_eps",)),
    Bug("layer_norm", "no_sqrt", "norms.py", LN_RETURN,
        "return (x - mean) / (var + self.eps) * self.weight + self.bias",
        "divides by the variance instead of the standard deviation",
        diagnosis=("layer_norm:no_sqrt",)),
    Bug("layer_norm", "global_statistics", "norms.py", LN_FORWARD,
        """        mean = x.mean()
        var = x.var(unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias""",
        "takes the mean and variance over the whole tensor instead of over the last dimension",
        diagnosis=("layer_norm:global_statistics",)),
    Bug("layer_norm", "weight_bias_swapped", "norms.py", "* self.weight + self.bias",
        "* self.bias + self.weight",
        "multiplies by bias and adds weight",
        diagnosis=("layer_norm:weight_bias_swapped",)),
    Bug("layer_norm", "no_bias", "norms.py", "* self.weight + self.bias", "* self.weight",
        "creates bias but never adds it",
        diagnosis=("layer_norm:no_bias",)),
    Bug("layer_norm", "rms_denominator", "norms.py", LN_VAR,
        "var = x.pow(2).mean(dim=-1, keepdim=True)",
        "centres x but divides by the root mean square of x instead of its standard deviation",
        diagnosis=("layer_norm:rms_denominator",)),
    Bug("layer_norm", "naive_variance", "norms.py", LN_VAR,
        "var = (x * x).mean(dim=-1, keepdim=True) - mean * mean",
        "computes the variance as E[x²] - E[x]², which cancels in float32 for inputs far from zero",
        diagnosis=("layer_norm:naive_variance",)),
    Bug("layer_norm", "weight_starts_at_zeros", "norms.py",
        "self.weight = nn.Parameter(torch.ones(d_model))\n        self.bias",
        "self.weight = nn.Parameter(torch.zeros(d_model))\n        self.bias",
        "initialises weight to zeros, so a fresh layer outputs only its bias",
        diagnosis=("layer_norm:initial_value",)),
    Bug("layer_norm", "plain_tensor_parameters", "norms.py",
        """        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))""",
        """        self.weight = torch.ones(d_model)
        self.bias = torch.zeros(d_model)""",
        "stores weight and bias as plain tensors, so they are neither trained nor saved",
        diagnosis=("layer_norm:parameters_plain_tensors",)),
    Bug("layer_norm", "detached_statistics", "norms.py",
        "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n        var",
        "mean = x.mean(dim=-1, keepdim=True).detach()\n        var",
        "detaches the mean, as if the statistics were constants, so the gradient w.r.t. x is wrong",
        diagnosis=("layer_norm:mean_detached",)),
    Bug("layer_norm", "centres_in_place", "norms.py", LN_FORWARD,
        """        x -= x.mean(dim=-1, keepdim=True)
        var = x.pow(2).mean(dim=-1, keepdim=True)
        return x / torch.sqrt(var + self.eps) * self.weight + self.bias""",
        "subtracts the mean from the caller's tensor in place",
        diagnosis=("layer_norm:centred_in_place",)),
    Bug("layer_norm", "library_layer_norm", "norms.py", LN_FORWARD,
        "        return torch.nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)",
        "calls F.layer_norm instead of writing it",
        named_by="must be written from scratch"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("layer_norm", "mean_over_first_dim", "norms.py", "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)",
        "mean = x.mean(dim=0, keepdim=True)  # (..., 1)",
        "takes the mean over dimension 0 instead of the features",
        diagnosis=("layer_norm:mean_over_dim0",)),
]

# A member of the fitted eps family (mistakes.FIXED_EPS) that no single entry names.
BUGS += [
    Bug("layer_norm", "eps_written_in", "norms.py", LN_RETURN,
        "return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias",
        "writes the default eps into the formula instead of using self.eps",
        diagnosis=("layer_norm:fixed_eps",)),
]

# Siblings of held-out set 8's rms_norm bugs: the weight as (1 + weight), a computation in float32.
BUGS += [
    Bug("layer_norm", "gemma_one_plus_weight", "norms.py", "* self.weight + self.bias", "* (1 + self.weight) + self.bias",
        "scales by (1 + weight), Gemma's convention", diagnosis=("layer_norm:one_plus_weight",)),
    Bug("layer_norm", "float32_result", "norms.py",
        "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias",
        "return ((x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias).float()  # mixed precision",
        "a mixed-precision habit: the result is cast to float32 whatever the input's dtype (a float32 computation "
        "cast back, as LLaMA's code does, is correct; one that stays float32 is not)",
        diagnosis=("layer_norm:lower_precision", "general:float_dtype_changed")),
]

# A statistic without keepdim=True, named from torch's broadcasting error (mistakes.keepdim_lost).
BUGS += [
    Bug("layer_norm", "mean_without_keepdim", "norms.py", "mean = x.mean(dim=-1, keepdim=True)", "mean = x.mean(dim=-1)",
        "takes the mean without keepdim=True", diagnosis=("layer_norm:without_keepdim",)),
    Bug("layer_norm", "variance_without_keepdim", "norms.py",
        "var = (x - mean).pow(2).mean(dim=-1, keepdim=True)", "var = (x - mean).pow(2).mean(dim=-1)",
        "takes the variance without keepdim=True", diagnosis=("layer_norm:without_keepdim",)),
]

# Two slips at once in the denominator, the usual x.std() + eps (mistakes: the std_plus_eps variant).
LN_RETURN = "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"
BUGS += [
    Bug("layer_norm", "std_plus_eps", "norms.py", LN_RETURN,
        "return (x - mean) / (x.std(dim=-1, keepdim=True) + self.eps) * self.weight + self.bias",
        "divides by x.std() + eps: the unbiased std, with eps outside the root", diagnosis=("layer_norm:std_plus_eps",)),
    Bug("layer_norm", "unbiased_std_no_eps", "norms.py", LN_RETURN,
        "return (x - mean) / x.std(dim=-1, keepdim=True) * self.weight + self.bias",
        "divides by x.std() with no eps", diagnosis=("layer_norm:unbiased_no_eps",)),
    Bug("layer_norm", "bias_before_weight", "norms.py", LN_RETURN,
        "return ((x - mean) / torch.sqrt(var + self.eps) + self.bias) * self.weight",
        "adds the bias before multiplying by the weight",
        diagnosis=("layer_norm:bias_before_weight",)),
    Bug("layer_norm", "variance_over_dim_minus_2", "norms.py", LN_VAR,
        "var = (x - mean).pow(2).mean(dim=-2, keepdim=True)  # (..., 1), biased",
        "takes the variance over dim=-2 while the mean is over the features",
        diagnosis=("layer_norm:variance_axis",)),
    Bug("layer_norm", "statistics_over_first_dim", "norms.py", LN_FORWARD,
        LN_FORWARD.replace("dim=-1", "dim=0"),
        "takes both the mean and the variance over dim=0, the batch, instead of the features",
        diagnosis=("layer_norm:statistics_axis",)),
    Bug("layer_norm", "affine_before_normalising", "norms.py", LN_FORWARD,
        """        x = x * self.weight + self.bias
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)""",
        "scales and shifts x first, then normalises the result",
        diagnosis=("layer_norm:affine_first",)),
    Bug("layer_norm", "affine_twice", "norms.py", "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
        "        x = self.weight * x + self.bias  # the affine part, as the paper's figure shows it\n"
        "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
        "applies the affine part at the start as well as at the end",
        diagnosis=("layer_norm:affine_twice",)),
    Bug("layer_norm", "half_power_precedence", "norms.py", LN_RETURN,
        "return (x - mean) / (var + self.eps) ** 1 / 2 * self.weight + self.bias",
        "writes the square root as ** 1 / 2, which Python reads as (** 1) / 2",
        diagnosis=("layer_norm:half_power",)),
    Bug("layer_norm", "global_mean_only", "norms.py", "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)",
        "mean = x.mean()", "averages over the whole tensor for the mean (the variance stays per position)",
        diagnosis=("layer_norm:global_mean_only",)),
    # Held-out set 13's normalise_all_non_batch_dims.
    Bug("layer_norm", "per_sample_statistics", "norms.py",
        "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n"
        "        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased",
        "        dims = tuple(range(1, x.dim()))\n        mean = x.mean(dim=dims, keepdim=True)\n"
        "        var = (x - mean).pow(2).mean(dim=dims, keepdim=True)",
        "takes the statistics over every dimension of a sample, not over the features",
        diagnosis=("layer_norm:per_sample_statistics",)),
]
