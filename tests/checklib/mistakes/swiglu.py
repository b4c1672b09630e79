"""The known mistakes of `swiglu` (The SwiGLU feed-forward network): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, simulated, variants
from .general import besides, biased_layer_mistakes


def swiglu(x: Tensor, state: dict[str, Tensor], *, variant: str = "",
           activation: Callable[[Tensor], Tensor] | None = None, extra_silu: str = "") -> Tensor:
    """The contract's SwiGLU in float64, with the mistake `variant` switched on, or the gate through another
    `activation`, or silu applied once more at `extra_silu` (one of EXTRA_SILU_PLACES)."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()
    gate, up = F.linear(x, s["w_gate.weight"]), F.linear(x, s["w_up.weight"])
    if extra_silu:
        hidden = F.silu(gate) * (F.silu(up) if extra_silu == "w_up(x)" else up)
        out = F.linear(F.silu(hidden) if extra_silu.startswith("silu") else hidden, s["w_down.weight"])
        return F.silu(out) if extra_silu == "w_down(...)" else out
    activation = activation or {"sigmoid": torch.sigmoid, "relu": F.relu, "gelu": F.gelu,
                                "no_activation": lambda z: z}.get(variant, F.silu)
    if variant == "silu_on_up":
        hidden = gate * F.silu(up)
    elif variant == "sum":
        hidden = F.silu(gate) + up
    elif variant == "no_up":
        hidden = F.silu(gate)
    elif variant == "silu_after_product":
        hidden = F.silu(gate * up)
    elif variant == "gate_for_both":
        hidden = F.silu(gate) * gate
    elif variant == "up_for_both":
        hidden = F.silu(up) * up
    elif variant == "silu_on_output":
        return F.silu(F.linear(gate * up, s["w_down.weight"]))
    else:
        hidden = activation(gate) * up
    return F.linear(hidden, s["w_down.weight"])


SWIGLU_MISTAKES = variants("swiglu", (
    ("your silu is applied to w_up's projection; it belongs on the gate: silu(w_gate(x)) * w_up(x) "
     "(or your w_gate and w_up are swapped)", "silu_on_up"),
    ("your gate uses sigmoid (the original GLU); SwiGLU's is silu(z) = z * sigmoid(z)", "sigmoid"),
    ("your gate uses ReLU (that is ReGLU); SwiGLU's is silu", "relu"),
    ("your gate uses GELU (that is GeGLU); SwiGLU's is silu", "gelu"),
    ("your gate has no activation (a bilinear layer): apply silu to w_gate(x)", "no_activation"),
    ("your hidden layer adds the two projections; a gated unit multiplies them elementwise", "sum"),
    ("your hidden layer is silu(w_gate(x)) alone: multiply it by w_up(x)", "no_up"),
    ("your silu is applied to the product; only the gate goes through it: silu(w_gate(x)) * w_up(x)",
     "silu_after_product"),
    ("your hidden layer is silu(w_gate(x)) * w_gate(x): w_gate serves both branches (a copy-paste?), the second "
     "factor is w_up(x)", "gate_for_both"),
    ("your hidden layer is silu(w_up(x)) * w_up(x): w_up serves both branches (a copy-paste?), the gate is "
     "silu(w_gate(x))", "up_for_both"),
    ("your silu is applied to the output, silu(w_down(w_gate(x) * w_up(x))), instead of the gate: the activation "
     "gates the hidden layer, w_down(silu(w_gate(x)) * w_up(x)), and the output is w_down's as it is",
     "silu_on_output"),
))
SWIGLU_BIASES = mistake("swiglu", "biases", "your layers have biases: SwiGLU's three nn.Linear are created with bias=False",
                        lambda expected: expected | {k.replace(".weight", ".bias") for k in expected})
W_DOWN_TRANSPOSED = mistake("swiglu", "w_down_transposed",
                            "your w_down maps d_model to d_ff; it maps the hidden d_ff features back to d_model: "
                            "nn.Linear(d_ff, d_model)", lambda d_model, d_ff: torch.Size((d_ff, d_model)))
W_IN_TRANSPOSED = mistake("swiglu", "w_in_transposed",
                          "your {layer} maps d_ff to d_model; it maps x's d_model features up to d_ff: "
                          "nn.Linear(d_model, d_ff)", lambda d_model, d_ff: torch.Size((d_model, d_ff)))
GATE_DETACHED = mistake("swiglu", "gate_detached",
                        "your gate is detached from the graph (.detach() or torch.no_grad()): the forward is right, but "
                        "no gradient flows through silu(w_gate(x)), so w_gate never learns",
                        lambda x, state, grad_output: swiglu_detached_gate_x_grad(x, state, grad_output))


# Families: some of the layers with a bias (all three is SWIGLU_BIASES); the hidden layer sized by another
# width in scope than d_ff (LLaMA's 2/3 rule applied to a d_ff the caller already chose, d_model, GPT's 4 * d_model,
# a fused gate-and-up width, ...).
SWIGLU_LAYER_BIAS = mistake("swiglu", "layer_bias",
                            "your {layers} has a bias (nn.Linear's default bias=True): SwiGLU's three nn.Linear are "
                            "created with bias=False", dict())
SWIGLU_HIDDEN_WIDTH = mistake("swiglu", "hidden_width",
                              "your hidden layer is {expr} wide: SwiGLU(d_model, d_ff) uses d_ff itself as the hidden "
                              "width, nn.Linear(d_model, d_ff) for w_gate and w_up and nn.Linear(d_ff, d_model) for "
                              "w_down (the caller has already chosen d_ff: no 2/3 rule, no rounding)", dict())
SWIGLU_LAYERS = ("w_gate", "w_up", "w_down")
HIDDEN_WIDTHS: dict[str, Callable[[int, int], int]] = {
    "int(2 * d_ff / 3)": lambda d, f: int(2 * f / 3), "d_model": lambda d, f: d, "4 * d_model": lambda d, f: 4 * d,
    "int(8 * d_model / 3)": lambda d, f: int(8 * d / 3), "2 * d_ff": lambda d, f: 2 * f, "d_ff // 2": lambda d, f: f // 2,
    "256 * ceil(int(2 * d_ff / 3) / 256)": lambda d, f: 256 * -(-int(2 * f / 3) // 256)}


def swiglu_shapes(d_model: int, hidden: int) -> dict[str, tuple[int, ...]]:
    """The weights' shapes of a SwiGLU whose hidden layer is `hidden` wide."""
    return {"w_gate.weight": (hidden, d_model), "w_up.weight": (hidden, d_model), "w_down.weight": (d_model, hidden)}


def swiglu_width_mistakes(d_model: int, d_ff: int, key: str | None = None) -> Mistakes:
    """For the shapes of the weights (a dict key -> shape), or (`key`) the torch.Size of one of them: each other
    width of HIDDEN_WIDTHS that differs from d_ff."""
    widths = {expr: fn(d_model, d_ff) for expr, fn in HIDDEN_WIDTHS.items()}
    return {SWIGLU_HIDDEN_WIDTH.text(expr=expr): (lambda w=w: swiglu_shapes(d_model, w) if key is None
                                                  else torch.Size(swiglu_shapes(d_model, w)[key]))
            for expr, w in widths.items() if w != d_ff}


# A family: the gate through another activation than silu (sigmoid, ReLU and GELU are named entries).
SWIGLU_ACTIVATION = mistake("swiglu", "activation",
                            "your gate uses {fn}: SwiGLU's activation is silu(z) = z * sigmoid(z), F.silu", dict())
GATE_ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "F.gelu(z, approximate='tanh')": lambda z: F.gelu(z, approximate="tanh"), "torch.tanh": torch.tanh,
    "F.softplus": F.softplus, "F.elu": F.elu, "F.leaky_relu": F.leaky_relu, "F.mish": F.mish,
    "F.hardswish": F.hardswish, "z * sigmoid(1.702 * z)": lambda z: z * torch.sigmoid(1.702 * z),
    # silu written out by hand, one slip each (the minus of exp(-z) lost, the 1 / (1 + ...) left out, a product
    # where silu divides)
    "z / (1 + torch.exp(z))": lambda z: z / (1 + torch.exp(z)), "z * torch.exp(-z)": lambda z: z * torch.exp(-z),
    "z * torch.exp(z)": lambda z: z * torch.exp(z), "z * (1 + torch.exp(-z))": lambda z: z * (1 + torch.exp(-z))}


# A family: silu on the gate and once more elsewhere (on w_up alone instead of the gate is silu_on_up).
SWIGLU_EXTRA_SILU = mistake("swiglu", "extra_silu",
                            "your silu is applied to {where} as well as to the gate: only w_gate(x) goes through it, "
                            "w_down(silu(w_gate(x)) * w_up(x))", dict())
EXTRA_SILU_PLACES = ("w_up(x)", "silu(w_gate(x)) * w_up(x)", "w_down(...)")  # the up branch, the product, the output


def swiglu_mistakes(x: Tensor, state: dict[str, Tensor]) -> Mistakes:
    """For SwiGLU(x) with these weights; also the gate through another activation (GATE_ACTIVATIONS), and silu
    applied once more somewhere (EXTRA_SILU_PLACES)."""
    family = {SWIGLU_ACTIVATION.text(fn=fn): (lambda act=act: swiglu(x, state, activation=act))
              for fn, act in GATE_ACTIVATIONS.items()}
    family.update({SWIGLU_EXTRA_SILU.text(where=where): (lambda w=where: swiglu(x, state, extra_silu=w))
                   for where in EXTRA_SILU_PLACES})
    return besides(simulated(SWIGLU_MISTAKES, lambda variant: swiglu(x, state, variant=variant)), family)


def swiglu_key_mistakes(expected: set[str]) -> Mistakes:
    """For the state-dict keys: all three layers with a bias, or some of them."""
    return besides(bind([SWIGLU_BIASES], expected), biased_layer_mistakes(SWIGLU_LAYER_BIAS, expected, SWIGLU_LAYERS))


def swiglu_shape_mistakes(d_model: int, d_ff: int, key: str) -> Mistakes:
    """For the shape of state_dict()[key]."""
    family = swiglu_width_mistakes(d_model, d_ff, key)
    if key == "w_down.weight":
        return {**bind([W_DOWN_TRANSPOSED], d_model, d_ff), **family}
    return {**bind([W_IN_TRANSPOSED], d_model, d_ff, layer=key.split(".")[0]), **family}


def swiglu_detached_gate_x_grad(x: Tensor, state: dict[str, Tensor], grad_output: Tensor) -> Tensor:
    s = {k: v.double() for k, v in state.items()}
    x = x.double().clone().requires_grad_(True)
    out = F.linear(F.silu(F.linear(x, s["w_gate.weight"])).detach() * F.linear(x, s["w_up.weight"]), s["w_down.weight"])
    (out * grad_output.double()).sum().backward()
    return x.grad


def swiglu_grad_mistakes(x: Tensor, state: dict[str, Tensor], grad_output: Tensor) -> Mistakes:
    return bind([GATE_DETACHED], x, state, grad_output)
