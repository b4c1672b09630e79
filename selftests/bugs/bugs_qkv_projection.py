from . import Bug

PROJECT = "return self.w_q(x), self.w_k(x), self.w_v(x)"

BUGS = [
    Bug("qkv_projection", "swapped_k_v", "attention.py", PROJECT,
        "return self.w_q(x), self.w_v(x), self.w_k(x)",
        "returns the value projection as k and the key projection as v",
        diagnosis=("qkv_projection:returned_order",)),
    Bug("qkv_projection", "w_q_for_k", "attention.py", PROJECT,
        "return self.w_q(x), self.w_q(x), self.w_v(x)",
        "reuses the query layer to compute the keys",
        diagnosis=("qkv_projection:wrong_layer",)),
    Bug("qkv_projection", "bias_flag_ignored", "attention.py",
        "self.w_q = nn.Linear(d_model, d_model, bias=bias)",
        "self.w_q = nn.Linear(d_model, d_model)",
        "forgets to pass bias=bias to one of the layers",
        diagnosis=("qkv_projection:layer_with_bias",)),
    Bug("qkv_projection", "no_divisibility_check", "attention.py",
        '        if d_model % n_heads != 0:\n            raise ValueError(f"d_model={d_model} is not divisible by n_heads={n_heads}")\n        self.d_model',
        "        self.d_model",
        "does not reject a d_model that the heads cannot share equally",
        named_by="expected a ValueError"),
    Bug("qkv_projection", "d_k_true_division", "attention.py",
        "d_model // n_heads\n",
        "d_model / n_heads\n",
        "computes d_k with / so it is a float",
        diagnosis=("qkv_projection:float_d_k",)),
    Bug("qkv_projection", "out_proj_named_w_o", "attention.py",
        "self.out_proj = nn.Linear",
        "self.w_o = nn.Linear",
        "names the output projection w_o as in other tutorials, not out_proj",
        diagnosis=("qkv_projection:out_proj_named_w_o",)),
    Bug("qkv_projection", "no_bias_in_projection", "attention.py", PROJECT,
        "return (x @ self.w_q.weight.T, x @ self.w_k.weight.T, x @ self.w_v.weight.T)",
        "projects with the weights only and forgets the biases",
        diagnosis=("qkv_projection:bias_not_applied",)),
]

BUGS += [
    Bug("qkv_projection", "w_k_for_v", "attention.py", PROJECT,
        "return self.w_q(x), self.w_k(x), self.w_k(x)",
        "copies the key line for the values: v comes from w_k",
        diagnosis=("qkv_projection:wrong_layer",)),
]

# A projection sized with another of the contract's widths (mistakes.general.LINEAR_WIDTHS).
BUGS += [
    Bug("qkv_projection", "k_proj_head_width", "attention.py",
        "self.w_k = nn.Linear(d_model, d_model, bias=bias)", "self.w_k = nn.Linear(d_model, self.d_k, bias=bias)",
        "the key projection maps to one head's width d_k instead of d_model",
        diagnosis=("general:linear_widths",)),
    Bug("qkv_projection", "v_proj_per_head_count", "attention.py",
        "self.w_v = nn.Linear(d_model, d_model, bias=bias)", "self.w_v = nn.Linear(d_model, n_heads, bias=bias)",
        "the value projection maps to n_heads features",
        diagnosis=("general:linear_widths",)),
    Bug("qkv_projection", "out_proj_from_head_width", "attention.py",
        "self.out_proj = nn.Linear(d_model, d_model, bias=bias)", "self.out_proj = nn.Linear(self.d_k, d_model, bias=bias)",
        "the output projection reads one head's width",
        diagnosis=("general:linear_widths",)),
]

BUGS += [
    Bug("qkv_projection", "bias_default_false", "attention.py",
        "def __init__(self, d_model: int, n_heads: int, bias: bool = True) -> None:",
        "def __init__(self, d_model: int, n_heads: int, bias: bool = False) -> None:",
        "the bias defaults to False (LLaMA's habit) instead of the contract's True",
        diagnosis=("qkv_projection:bias_default_false",)),
    Bug("qkv_projection", "q_prescaled", "attention.py",
        "return self.w_q(x), self.w_k(x), self.w_v(x)",
        "return self.w_q(x) / math.sqrt(self.d_k), self.w_k(x), self.w_v(x)",
        "scales the queries in the projection as fairseq does (q * scaling), so they are scaled twice",
        diagnosis=("qkv_projection:projection_divided",)),
    Bug("qkv_projection", "v_weight_not_transposed", "attention.py",
        "return self.w_q(x), self.w_k(x), self.w_v(x)",
        "return self.w_q(x), self.w_k(x), x @ self.w_v.weight + (0 if self.w_v.bias is None else self.w_v.bias)",
        "writes the value projection by hand as x @ W + b, without transposing nn.Linear's (out, in) weight",
        diagnosis=("qkv_projection:weight_not_transposed",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('qkv_projection', 'q_k_swapped', 'attention.py',
        'return self.w_q(x), self.w_k(x), self.w_v(x)',
        'return self.w_k(x), self.w_q(x), self.w_v(x)',
        'returns w_k(x) as q and w_q(x) as k (q and k swapped)',
        diagnosis=("qkv_projection:returned_order",)),
    Bug('qkv_projection', 'q_weight_untransposed', 'attention.py',
        'return self.w_q(x), self.w_k(x), self.w_v(x)',
        'return x @ self.w_q.weight + self.w_q.bias, self.w_k(x), self.w_v(x)',
        'computes q as x @ w_q.weight + bias, without the transpose',
        diagnosis=("qkv_projection:weight_not_transposed",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('qkv_projection', 'v_unprojected', 'attention.py',
        'return self.w_q(x), self.w_k(x), self.w_v(x)',
        'return self.w_q(x), self.w_k(x), x',
        'returns x itself as v, forgetting its projection',
        diagnosis=("qkv_projection:unprojected",)),
    Bug('qkv_projection', 'd_k_is_d_model', 'attention.py',
        'self.d_k = d_model, n_heads, d_model // n_heads\n',
        'self.d_k = d_model, n_heads, d_model\n',
        'sets d_k = d_model, forgetting to divide by the heads',
        diagnosis=("qkv_projection:d_k_size",)),
    Bug("qkv_projection", "q_unprojected", "attention.py", "return self.w_q(x), self.w_k(x), self.w_v(x)",
        "return x, self.w_k(x), self.w_v(x)", "returns x itself as q, forgetting its projection",
        diagnosis=("qkv_projection:unprojected",)),
]
