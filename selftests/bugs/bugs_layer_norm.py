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
        diagnosis=("your variance is the unbiased one (divides by D",)),
    Bug("layer_norm", "eps_outside_sqrt", "norms.py", LN_RETURN,
        "return (x - mean) / (torch.sqrt(var) + self.eps) * self.weight + self.bias",
        "adds eps after the square root instead of inside it",
        diagnosis=("your eps is added after the square root, (x -",)),
    Bug("layer_norm", "eps_ignored", "norms.py", LN_RETURN,
        "return (x - mean) / torch.sqrt(var) * self.weight + self.bias",
        "stores eps but never uses it",
        diagnosis=("your LayerNorm ignores eps: (x - mean) /",)),
    Bug("layer_norm", "no_sqrt", "norms.py", LN_RETURN,
        "return (x - mean) / (var + self.eps) * self.weight + self.bias",
        "divides by the variance instead of the standard deviation",
        diagnosis=("your LayerNorm divides by var + eps, not by its",)),
    Bug("layer_norm", "global_statistics", "norms.py", LN_FORWARD,
        """        mean = x.mean()
        var = x.var(unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias""",
        "takes the mean and variance over the whole tensor instead of over the last dimension",
        diagnosis=("your mean and variance are taken over the whole",)),
    Bug("layer_norm", "weight_bias_swapped", "norms.py", "* self.weight + self.bias",
        "* self.bias + self.weight",
        "multiplies by bias and adds weight",
        diagnosis=("your LayerNorm multiplies by bias and adds",)),
    Bug("layer_norm", "no_bias", "norms.py", "* self.weight + self.bias", "* self.weight",
        "creates bias but never adds it",
        diagnosis=("your LayerNorm never adds bias",)),
    Bug("layer_norm", "rms_denominator", "norms.py", LN_VAR,
        "var = x.pow(2).mean(dim=-1, keepdim=True)",
        "centres x but divides by the root mean square of x instead of its standard deviation",
        diagnosis=("your LayerNorm divides by the root mean square",)),
    Bug("layer_norm", "naive_variance", "norms.py", LN_VAR,
        "var = (x * x).mean(dim=-1, keepdim=True) - mean * mean",
        "computes the variance as E[x²] - E[x]², which cancels in float32 for inputs far from zero",
        diagnosis=("your variance is E[x²] - E[x]², which cancels",)),
    Bug("layer_norm", "weight_starts_at_zeros", "norms.py",
        "self.weight = nn.Parameter(torch.ones(d_model))\n        self.bias",
        "self.weight = nn.Parameter(torch.zeros(d_model))\n        self.bias",
        "initialises weight to zeros, so a fresh layer outputs only its bias",
        diagnosis=("your weight starts at 0s; it starts at 1s, so",)),
    Bug("layer_norm", "plain_tensor_parameters", "norms.py",
        """        self.weight = nn.Parameter(torch.ones(d_model))
        self.bias = nn.Parameter(torch.zeros(d_model))""",
        """        self.weight = torch.ones(d_model)
        self.bias = torch.zeros(d_model)""",
        "stores weight and bias as plain tensors, so they are neither trained nor saved",
        diagnosis=("your LayerNorm's parameters are plain tensors",)),
    Bug("layer_norm", "detached_statistics", "norms.py",
        "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n        var",
        "mean = x.mean(dim=-1, keepdim=True).detach()\n        var",
        "detaches the mean, as if the statistics were constants, so the gradient w.r.t. x is wrong",
        diagnosis=("your mean is detached from the graph",)),
    Bug("layer_norm", "centres_in_place", "norms.py", LN_FORWARD,
        """        x -= x.mean(dim=-1, keepdim=True)
        var = x.pow(2).mean(dim=-1, keepdim=True)
        return x / torch.sqrt(var + self.eps) * self.weight + self.bias""",
        "subtracts the mean from the caller's tensor in place",
        diagnosis=("your LayerNorm subtracted the mean from the",)),
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
        diagnosis=('mean is taken over dimension 0',)),
]

# A member of the fitted eps family (mistakes.FIXED_EPS) that no single entry names.
BUGS += [
    Bug("layer_norm", "eps_written_in", "norms.py", LN_RETURN,
        "return (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias",
        "writes the default eps into the formula instead of using self.eps",
        diagnosis=("your eps is 1e-5 whatever eps the norm is given",)),
]

# Siblings of held-out set 8's rms_norm bugs: the weight as (1 + weight), a computation in float32.
BUGS += [
    Bug("layer_norm", "gemma_one_plus_weight", "norms.py", "* self.weight + self.bias", "* (1 + self.weight) + self.bias",
        "scales by (1 + weight), Gemma's convention", diagnosis=("(1 + weight)",)),
    Bug("layer_norm", "float32_result", "norms.py",
        "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias",
        "return ((x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias).float()  # mixed precision",
        "a mixed-precision habit: the result is cast to float32 whatever the input's dtype (a float32 computation "
        "cast back, as LLaMA's code does, is correct; one that stays float32 is not)",
        diagnosis=("computes in float32 for a float64 input", "your result changed dtype on the way")),
]

# A statistic without keepdim=True, named from torch's broadcasting error (mistakes.keepdim_lost).
BUGS += [
    Bug("layer_norm", "mean_without_keepdim", "norms.py", "mean = x.mean(dim=-1, keepdim=True)", "mean = x.mean(dim=-1)",
        "takes the mean without keepdim=True", diagnosis=("your mean or variance loses its last dim",)),
    Bug("layer_norm", "variance_without_keepdim", "norms.py",
        "var = (x - mean).pow(2).mean(dim=-1, keepdim=True)", "var = (x - mean).pow(2).mean(dim=-1)",
        "takes the variance without keepdim=True", diagnosis=("your mean or variance loses its last dim",)),
]

# Two slips at once in the denominator, the usual x.std() + eps (mistakes: the std_plus_eps variant).
LN_RETURN = "return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias"
BUGS += [
    Bug("layer_norm", "std_plus_eps", "norms.py", LN_RETURN,
        "return (x - mean) / (x.std(dim=-1, keepdim=True) + self.eps) * self.weight + self.bias",
        "divides by x.std() + eps: the unbiased std, with eps outside the root", diagnosis=("x.std() + eps",)),
    Bug("layer_norm", "unbiased_std_no_eps", "norms.py", LN_RETURN,
        "return (x - mean) / x.std(dim=-1, keepdim=True) * self.weight + self.bias",
        "divides by x.std() with no eps", diagnosis=("the unbiased standard deviation without eps",)),
    Bug("layer_norm", "bias_before_weight", "norms.py", LN_RETURN,
        "return ((x - mean) / torch.sqrt(var + self.eps) + self.bias) * self.weight",
        "adds the bias before multiplying by the weight",
        diagnosis=("adds bias before it multiplies by weight",)),
    Bug("layer_norm", "variance_over_dim_minus_2", "norms.py", LN_VAR,
        "var = (x - mean).pow(2).mean(dim=-2, keepdim=True)  # (..., 1), biased",
        "takes the variance over dim=-2 while the mean is over the features",
        diagnosis=("your variance is taken over dim=-2",)),
    Bug("layer_norm", "statistics_over_first_dim", "norms.py", LN_FORWARD,
        LN_FORWARD.replace("dim=-1", "dim=0"),
        "takes both the mean and the variance over dim=0, the batch, instead of the features",
        diagnosis=("your mean and variance are taken over dim=0",)),
    Bug("layer_norm", "affine_before_normalising", "norms.py", LN_FORWARD,
        """        x = x * self.weight + self.bias
        mean = x.mean(dim=-1, keepdim=True)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps)""",
        "scales and shifts x first, then normalises the result",
        diagnosis=("your LayerNorm applies weight and bias to x before it normalises",)),
    Bug("layer_norm", "affine_twice", "norms.py", "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
        "        x = self.weight * x + self.bias  # the affine part, as the paper's figure shows it\n"
        "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n",
        "applies the affine part at the start as well as at the end",
        diagnosis=("your LayerNorm applies weight and bias twice",)),
    Bug("layer_norm", "half_power_precedence", "norms.py", LN_RETURN,
        "return (x - mean) / (var + self.eps) ** 1 / 2 * self.weight + self.bias",
        "writes the square root as ** 1 / 2, which Python reads as (** 1) / 2",
        diagnosis=("your LayerNorm divides by 2 (var + eps)",)),
    Bug("layer_norm", "global_mean_only", "norms.py", "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)",
        "mean = x.mean()", "averages over the whole tensor for the mean (the variance stays per position)",
        diagnosis=("your mean is taken over the whole tensor (x.mean(), no dim)",)),
    # Held-out set 13's normalise_all_non_batch_dims.
    Bug("layer_norm", "per_sample_statistics", "norms.py",
        "        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)\n"
        "        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased",
        "        dims = tuple(range(1, x.dim()))\n        mean = x.mean(dim=dims, keepdim=True)\n"
        "        var = (x - mean).pow(2).mean(dim=dims, keepdim=True)",
        "takes the statistics over every dimension of a sample, not over the features",
        diagnosis=("your mean and variance are taken per sample",)),
]
