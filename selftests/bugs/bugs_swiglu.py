from . import Bug

FORWARD = "return self.w_down(F.silu(self.w_gate(x)) * self.w_up(x))"

BUGS = [
    Bug("swiglu", "silu_on_up", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x) * F.silu(self.w_up(x)))",
        "applies silu to the up projection instead of the gate"),
    Bug("swiglu", "sigmoid_gate", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x).sigmoid() * self.w_up(x))",
        "gates with sigmoid (the original GLU) instead of silu"),
    Bug("swiglu", "relu_gate", "ffn.py", FORWARD,
        "return self.w_down(F.relu(self.w_gate(x)) * self.w_up(x))",
        "gates with ReLU (ReGLU) instead of silu"),
    Bug("swiglu", "gelu_gate", "ffn.py", FORWARD,
        "return self.w_down(F.gelu(self.w_gate(x)) * self.w_up(x))",
        "gates with GELU (GeGLU) instead of silu"),
    Bug("swiglu", "no_activation", "ffn.py", FORWARD,
        "return self.w_down(self.w_gate(x) * self.w_up(x))",
        "forgets the activation: a bilinear layer"),
    Bug("swiglu", "sum_not_product", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)) + self.w_up(x))",
        "adds the two projections instead of multiplying them"),
    Bug("swiglu", "no_up_projection", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)))",
        "creates w_up but never uses it: a plain silu MLP"),
    Bug("swiglu", "silu_after_product", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x) * self.w_up(x)))",
        "applies silu to the product instead of the gate alone"),
    Bug("swiglu", "with_biases", "ffn.py",
        """        self.w_gate = nn.Linear(d_model, d_ff, bias=False)
        self.w_up = nn.Linear(d_model, d_ff, bias=False)
        self.w_down = nn.Linear(d_ff, d_model, bias=False)""",
        """        self.w_gate = nn.Linear(d_model, d_ff)
        self.w_up = nn.Linear(d_model, d_ff)
        self.w_down = nn.Linear(d_ff, d_model)""",
        "keeps nn.Linear's default bias=True"),
    Bug("swiglu", "w_down_transposed", "ffn.py",
        "self.w_down = nn.Linear(d_ff, d_model, bias=False)",
        "self.w_down = nn.Linear(d_model, d_ff, bias=False)",
        "creates w_down with its features the wrong way round"),
    Bug("swiglu", "gate_detached", "ffn.py", FORWARD,
        "return self.w_down(F.silu(self.w_gate(x)).detach() * self.w_up(x))",
        "detaches the gate, so w_gate never learns"),
]
