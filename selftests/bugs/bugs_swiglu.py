from . import Bug

FORWARD = "return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))"

BUGS = [
    Bug("swiglu", "silu_on_up", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x) * F.silu(self.w_up(x)))",
        "applies silu to the up projection instead of the gate",
        diagnosis=("your silu is applied to w_up's projection; it",)),
    Bug("swiglu", "sigmoid_gate", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x).sigmoid() * self.w_up(x))",
        "gates with sigmoid (the original GLU) instead of silu",
        diagnosis=("your gate uses sigmoid (the original GLU);",)),
    Bug("swiglu", "relu_gate", "ffn.py", FORWARD,
        "return self.w_down(F.relu(self.w_gate(x)) * self.w_up(x))",
        "gates with ReLU (ReGLU) instead of silu",
        diagnosis=("your gate uses ReLU (that is ReGLU); SwiGLU's",)),
    Bug("swiglu", "gelu_gate", "ffn.py", FORWARD,
        "return self.w_down(F.gelu(self.w_gate(x)) * self.w_up(x))",
        "gates with GELU (GeGLU) instead of silu",
        diagnosis=("your gate uses GELU (that is GeGLU); SwiGLU's",)),
    Bug("swiglu", "no_activation", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x) * self.w_up(x))",
        "forgets the activation: a bilinear layer",
        diagnosis=("your gate has no activation (a bilinear layer):",)),
    Bug("swiglu", "sum_not_product", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)) + self.w_up(x))",
        "adds the two projections instead of multiplying them",
        diagnosis=("your hidden layer adds the two projections; a",)),
    Bug("swiglu", "no_up_projection", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)))",
        "creates w_up but never uses it: a plain silu MLP",
        diagnosis=("your hidden layer is silu(w_gate(x)) alone:",)),
    Bug("swiglu", "silu_after_product", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x) * self.w_up(x)))",
        "applies silu to the product instead of the gate alone",
        diagnosis=("your silu is applied to the product; only the",)),
    Bug("swiglu", "with_biases", "ffn.py",
        """        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)""",
        """        self.w_gate = nn.Linear(d_model, d_ff)
        self.w_up = nn.Linear(d_model, d_ff)
        self.w_down = nn.Linear(d_ff, d_model)""",
        "keeps nn.Linear's default bias=True",
        diagnosis=("your layers have biases: SwiGLU's three",)),
    Bug("swiglu", "w_down_transposed", "ffn.py",
        "self.w_down = nn.Linear(d_ff, d_model, bias=False)",
        "self.w_down = nn.Linear(d_model, d_ff, bias=False)",
        "creates w_down with its features the wrong way round",
        diagnosis=("your w_down maps d_model to d_ff; it maps the",)),
    Bug("swiglu", "gate_detached", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)).detach() * self.w_up(x))",
        "detaches the gate, so w_gate never learns",
        diagnosis=("your gate is detached from the graph (.detach()",)),
]

# Some layers with a bias, and a hidden layer of another width in scope (mistakes.SWIGLU_LAYER_BIAS,
# SWIGLU_HIDDEN_WIDTH): held-out set 8's w_down_has_bias and llama_two_thirds, and their siblings.
GATE = "        self.w_gate = nn.Linear(d_model, d_ff, bias=False)"
BUGS += [
    Bug("swiglu", "w_down_has_bias", "ffn.py", "self.w_down = nn.Linear(d_ff, d_model, bias=False)",
        "self.w_down = nn.Linear(d_ff, d_model)", "w_down keeps nn.Linear's default bias",
        diagnosis=("your w_down has a bias",)),
    Bug("swiglu", "gate_and_up_have_biases", "ffn.py",
        "self.w_gate = nn.Linear(d_model, d_ff, bias=False)\n        self.w_up = nn.Linear(d_model, d_ff, bias=False)",
        "self.w_gate = nn.Linear(d_model, d_ff)\n        self.w_up = nn.Linear(d_model, d_ff)",
        "forgets bias=False on the two input projections",
        diagnosis=("your w_gate, w_up has a bias",)),
    Bug("swiglu", "llama_two_thirds", "ffn.py", GATE,
        "        d_ff = int(2 * d_ff / 3)  # LLaMA's hidden size\n" + GATE,
        "applies LLaMA's 2/3 rule to d_ff, which the contract passes as the hidden width itself",
        diagnosis=("your hidden layer is int(2 * d_ff / 3) wide",)),
    Bug("swiglu", "llama_multiple_of", "ffn.py", GATE,
        "        d_ff = 256 * ((int(2 * d_ff / 3) + 255) // 256)  # LLaMA's multiple_of\n" + GATE,
        "copies LLaMA's hidden-size rounding (2/3 of d_ff, up to a multiple of 256)",
        diagnosis=("your hidden layer is 256 * ceil(int(2 * d_ff / 3) / 256) wide",)),
    Bug("swiglu", "gpt_four_times_d_model", "ffn.py", GATE,
        "        d_ff = 4 * d_model  # the classic MLP ratio\n" + GATE,
        "sizes the hidden layer as GPT's 4 * d_model, ignoring d_ff",
        diagnosis=("your hidden layer is 4 * d_model wide",)),
]

# The gate through another activation than silu (mistakes.SWIGLU_ACTIVATION).
BUGS += [
    Bug("swiglu", "gelu_tanh_gate", "ffn.py", FORWARD,
        "return self.w_down(F.gelu(self.w_gate(x), approximate='tanh') * self.w_up(x))",
        "gates with GELU's tanh approximation (GPT-2's GELU) instead of silu",
        diagnosis=("F.gelu(z, approximate='tanh')",)),
    Bug("swiglu", "tanh_gate", "ffn.py", FORWARD, "return self.w_down(self.w_gate(x).tanh() * self.w_up(x))",
        "gates with tanh", diagnosis=("your gate uses torch.tanh",)),
    Bug("swiglu", "quick_gelu_gate", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x) * (1.702 * self.w_gate(x)).sigmoid() * self.w_up(x))",
        "gates with CLIP's quick GELU, z * sigmoid(1.702 z)", diagnosis=("z * sigmoid(1.702 * z)",)),
]

# silu on the gate and once more elsewhere (mistakes.SWIGLU_EXTRA_SILU): held-out set 10's silu_both, and siblings.
BUGS += [
    Bug("swiglu", "silu_on_both", "ffn.py", FORWARD, "return self.w_down(F.silu(self.w_gate(x)) * F.silu(self.w_up(x)))",
        "applies silu to both projections", diagnosis=("your silu is applied to w_up(x) as well as to the gate",)),
    Bug("swiglu", "silu_on_output", "ffn.py", FORWARD, "return F.silu(self.w_down(F.silu(self.w_gate(x)) * self.w_up(x)))",
        "puts an activation after w_down too, as if the block were one more hidden layer",
        diagnosis=("your silu is applied to w_down(...) as well as to the gate",)),
    Bug("swiglu", "silu_on_gated_product", "ffn.py", FORWARD,
        "return self.w_down(F.silu(F.silu(self.w_gate(x)) * self.w_up(x)))",
        "applies silu to the gated product as well as to the gate",
        diagnosis=("your silu is applied to silu(w_gate(x)) * w_up(x) as well as to the gate",)),
    Bug("swiglu", "gate_for_both_branches", "ffn.py",
        "F.silu(self.w_gate(x)) * self.w_up(x)", "F.silu(self.w_gate(x)) * self.w_gate(x)",
        "copies the gate's line into the second factor, so w_gate serves both branches",
        diagnosis=("w_gate serves both branches",)),
    Bug("swiglu", "up_for_both_branches", "ffn.py",
        "F.silu(self.w_gate(x)) * self.w_up(x)", "F.silu(self.w_up(x)) * self.w_up(x)",
        "copies the up projection's line into the gate, so w_up serves both branches",
        diagnosis=("w_up serves both branches",)),
]
