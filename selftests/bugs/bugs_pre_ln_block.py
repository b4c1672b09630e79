from . import Bug

FORWARD = """        x = x + self.dropout(self.attention(self.norm1(x), mask, cache))
        return x + self.dropout(self.ff(self.norm2(x)))"""

BUGS = [
    Bug("pre_ln_block", "post_ln", "block.py", FORWARD,
        """        x = self.norm1(x + self.dropout(self.attention(x, mask, cache)))
        return self.norm2(x + self.dropout(self.ff(x)))""",
        "normalises after each residual addition (Post-LN, the original Transformer) instead of before each branch",
        diagnosis=("pre_ln_block:post_ln",)),
    Bug("pre_ln_block", "missing_attention_residual", "block.py",
        "x = x + self.dropout(self.attention(self.norm1(x), mask, cache))",
        "x = self.dropout(self.attention(self.norm1(x), mask, cache))",
        "drops the residual connection around the attention branch",
        diagnosis=("pre_ln_block:no_attention_residual",)),
    Bug("pre_ln_block", "shared_layer_norm", "block.py",
        "self.norm2 = nn.LayerNorm(d_model)",
        "self.norm2 = self.norm1",
        "reuses one LayerNorm for both branches instead of two separate ones",
        diagnosis=("pre_ln_block:one_norm_object", "pre_ln_block:shared_norm2")),
    Bug("pre_ln_block", "norm1_for_feed_forward", "block.py",
        "self.ff(self.norm2(x))",
        "self.ff(self.norm1(x))",
        "normalises the feed-forward input with norm1, leaving norm2 unused",
        diagnosis=("pre_ln_block:norm1_for_ff",)),
    Bug("pre_ln_block", "no_dropout", "block.py", FORWARD,
        """        x = x + self.attention(self.norm1(x), mask, cache)
        return x + self.ff(self.norm2(x))""",
        "creates the dropout layer but never applies it",
        diagnosis=("pre_ln_block:no_dropout",)),
    Bug("pre_ln_block", "dropout_always_on", "block.py", FORWARD,
        """        p = self.dropout.p
        x = x + nn.functional.dropout(self.attention(self.norm1(x), mask, cache), p, training=True)
        return x + nn.functional.dropout(self.ff(self.norm2(x)), p, training=True)""",
        "calls functional dropout with training=True, so it stays on in eval mode",
        diagnosis=("pre_ln_block:dropout_in_eval",)),
    Bug("pre_ln_block", "gelu_activation", "block.py",
        "nn.ReLU()",
        "nn.GELU()",
        "uses GELU in the feed-forward network where the contract asks for ReLU",
        diagnosis=("pre_ln_block:gelu",)),
    Bug("pre_ln_block", "mask_not_passed", "block.py",
        "self.attention(self.norm1(x), mask, cache)",
        "self.attention(self.norm1(x), cache=cache)",
        "forgets to pass the mask on to the attention",
        diagnosis=("pre_ln_block:ignores_mask",)),
    Bug("pre_ln_block", "residual_from_normed_input", "block.py", FORWARD,
        """        x = self.norm1(x)
        x = x + self.dropout(self.attention(x, mask, cache))
        x = self.norm2(x)
        return x + self.dropout(self.ff(x))""",
        "overwrites x with its normalised version, so the residual adds to norm(x) instead of x",
        diagnosis=("pre_ln_block:residual_from_normed",)),
    Bug("pre_ln_block", "always_causal", "block.py", FORWARD,
        """        if mask is None and cache is None:
            mask = x.new_ones(x.size(1), x.size(1)).tril().bool()
""" + FORWARD,
        "builds a causal mask when none is given, as in a GPT block, although the default is full attention",
        diagnosis=("pre_ln_block:always_causal",)),
]

BUGS += [
    Bug("pre_ln_block", "library_encoder_layer", "block.py",
        "        self.dropout = nn.Dropout(dropout)\n",
        "        self.dropout = nn.Dropout(dropout)\n"
        "        self.layer = nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, batch_first=True, norm_first=True)\n",
        "builds the block on torch.nn.TransformerEncoderLayer",
        named_by="must be written from scratch"),
]

BUGS += [
    Bug("pre_ln_block", "squeezes_the_batch", "block.py",
        "        return x + self.dropout(self.ff(self.norm2(x)))\n",
        "        return (x + self.dropout(self.ff(self.norm2(x)))).squeeze(0)\n",
        "squeezes away the batch dimension (tested with one example at a time), so a batch of one comes back 2-D",
        diagnosis=("pre_ln_block:squeezed_batch",)),
]

BUGS += [
    Bug("pre_ln_block", "dropout_on_the_residual_sum", "block.py",
        "x = x + self.dropout(self.attention(self.norm1(x), mask, cache))",
        "x = self.dropout(x + self.attention(self.norm1(x), mask, cache))",
        "drops out the sum of the residual and the attention branch, not the branch alone",
        diagnosis=("pre_ln_block:residual_dropped",)),
]

# Members of the wiring family (mistakes.WIRING): a sublayer reading another tensor in scope than its own stream.
FORWARD = ("        x = x + self.dropout(self.attention(self.norm1(x), mask, cache))\n"
           "        return x + self.dropout(self.ff(self.norm2(x)))")
BUGS += [
    Bug("pre_ln_block", "ff_reads_pre_attention_x", "block.py", FORWARD,
        "        h = x + self.dropout(self.attention(self.norm1(x), mask, cache))\n"
        "        return x + self.dropout(self.ff(self.norm2(h)))",
        "h/x mix-up: the second residual adds to the block input x, dropping the attention's residual",
        diagnosis=("pre_ln_block:wiring",)),
    Bug("pre_ln_block", "ff_normalises_block_input", "block.py", FORWARD,
        "        h = x + self.dropout(self.attention(self.norm1(x), mask, cache))\n"
        "        return h + self.dropout(self.ff(self.norm2(x)))",
        "the feed-forward normalises the block input x instead of h (a parallel block by accident)",
        diagnosis=("pre_ln_block:wiring",)),
    Bug("pre_ln_block", "attention_reads_raw_x", "block.py", FORWARD,
        "        x = x + self.dropout(self.attention(x, mask, cache))\n"
        "        return x + self.dropout(self.ff(self.norm2(x)))",
        "forgets norm1: the attention reads the raw x",
        diagnosis=("pre_ln_block:wiring",)),
    Bug("pre_ln_block", "ff_without_norm2", "block.py", FORWARD,
        "        x = x + self.dropout(self.attention(self.norm1(x), mask, cache))\n"
        "        return x + self.dropout(self.ff(x))",
        "forgets norm2: the feed-forward reads h itself",
        diagnosis=("pre_ln_block:wiring",)),
]
# A dropout built with a fixed rate instead of the block's argument (mistakes.DROPOUT_RATE_IGNORED).
BUGS += [
    Bug("pre_ln_block", "dropout_rate_ignored", "block.py", "self.dropout = nn.Dropout(dropout)",
        "self.dropout = nn.Dropout(0.1)", "the block ignores its dropout argument (always 0.1)",
        diagnosis=("pre_ln_block:dropout_rate_ignored",)),
    Bug("pre_ln_block", "dropout_rate_halved", "block.py", "self.dropout = nn.Dropout(dropout)",
        "self.dropout = nn.Dropout(dropout / 2)", "halves the dropout rate",
        diagnosis=("pre_ln_block:dropout_rate_ignored",)),
]

# Members of the activation family (mistakes.OTHER_ACTIVATION).
FF = "nn.Linear(d_model, d_ff), nn.ReLU(), nn.Linear(d_ff, d_model)"
BUGS += [
    Bug("pre_ln_block", "ff_sigmoid", "block.py", FF, "nn.Linear(d_model, d_ff), nn.Sigmoid(), nn.Linear(d_ff, d_model)",
        "uses a sigmoid between the two linear layers", diagnosis=("pre_ln_block:other_activation",)),
    Bug("pre_ln_block", "ff_without_activation", "block.py", FF,
        "nn.Linear(d_model, d_ff), nn.Identity(), nn.Linear(d_ff, d_model)",
        "leaves a placeholder where the activation goes", diagnosis=("pre_ln_block:other_activation",)),
    Bug("pre_ln_block", "ff_silu", "block.py", FF, "nn.Linear(d_model, d_ff), nn.SiLU(), nn.Linear(d_ff, d_model)",
        "uses SiLU (a LLaMA habit)", diagnosis=("pre_ln_block:other_activation",)),
    Bug("pre_ln_block", "norm1_eps_1e6", "block.py",
        "self.norm1 = nn.LayerNorm(d_model)", "self.norm1 = nn.LayerNorm(d_model, eps=1e-6)",
        "gives norm1 timm's eps of 1e-6", diagnosis=("pre_ln_block:norm1_eps_1e-6",)),
    Bug("pre_ln_block", "norms_eps_1e6", "block.py",
        "self.norm1 = nn.LayerNorm(d_model)\n        self.norm2 = nn.LayerNorm(d_model)",
        "self.norm1 = nn.LayerNorm(d_model, eps=1e-6)\n        self.norm2 = nn.LayerNorm(d_model, eps=1e-6)",
        "builds both LayerNorms with eps=1e-6, as timm's ViT blocks do", diagnosis=("pre_ln_block:norms_eps_1e-6",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('pre_ln_block', 'ff_residual_missing', 'block.py',
        'return x + self.dropout(self.ff(self.norm2(x)))',
        'return self.dropout(self.ff(self.norm2(x)))',
        'returns the feed-forward branch without adding it to x',
        diagnosis=("pre_ln_block:no_ff_residual",)),
    Bug('pre_ln_block', 'norm2_for_attention', 'block.py',
        'self.attention(self.norm1(x), mask, cache)',
        'self.attention(self.norm2(x), mask, cache)',
        "normalises the attention's input with norm2",
        diagnosis=("pre_ln_block:shared_norm2",)),
    Bug('pre_ln_block', 'norms_swapped', 'block.py',
        'x = x + self.dropout(self.attention(self.norm1(x), mask, cache))\n        return x + self.dropout(self.ff(self.norm2(x)))',
        'x = x + self.dropout(self.attention(self.norm2(x), mask, cache))\n        return x + self.dropout(self.ff(self.norm1(x)))',
        'swaps the two norms: norm2 before the attention, norm1 before the feed-forward',
        diagnosis=("pre_ln_block:wiring",)),
    Bug('pre_ln_block', 'norm_after_ff', 'block.py',
        'self.ff(self.norm2(x))',
        'self.norm2(self.ff(x))',
        "normalises the feed-forward's output instead of its input",
        diagnosis=("pre_ln_block:ff_output_normed",)),
    Bug("pre_ln_block", "attention_output_normed", "block.py", "self.attention(self.norm1(x), mask, cache)",
        "self.norm1(self.attention(x, mask, cache))",
        "normalises the attention's output instead of its input",
        diagnosis=("pre_ln_block:attention_output_normed",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('pre_ln_block', 'ff_no_dropout', 'block.py',
        'return x + self.dropout(self.ff(self.norm2(x)))',
        'return x + self.ff(self.norm2(x))',
        'forgets the dropout around the feed-forward branch',
        diagnosis=("pre_ln_block:branch_not_dropped",)),
    Bug('pre_ln_block', 'attention_no_dropout', 'block.py',
        'x = x + self.dropout(self.attention(self.norm1(x), mask, cache))',
        'x = x + self.attention(self.norm1(x), mask, cache)',
        'forgets the dropout around the attention branch',
        diagnosis=("pre_ln_block:branch_not_dropped",)),
    Bug("pre_ln_block", "residual_in_place", "block.py",
        "x = x + self.dropout(self.attention(self.norm1(x), mask, cache))",
        "x += self.dropout(self.attention(self.norm1(x), mask, cache))",
        "adds the attention branch into the caller's x in place (x += ...)",
        named_by="after TransformerBlock's forward"),
    # Held-out set 14's dropout_default_zero: no check built a block without its dropout argument.
    Bug("pre_ln_block", "dropout_default_zero", "block.py",
        "def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.1) -> None:",
        "def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float = 0.0) -> None:",
        "gives dropout a default of 0.0 instead of 0.1",
        diagnosis=("pre_ln_block:dropout_default",)),
]
