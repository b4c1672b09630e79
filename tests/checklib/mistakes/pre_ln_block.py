"""The known mistakes of `pre_ln_block` (The Pre-LN Transformer block): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import itertools
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, linear_width_mistakes
from .multi_head_attention import mha
from .qkv_projection import linear


def block(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, *, variant: str = "") -> Tensor:
    """The contract's Pre-LN TransformerBlock in eval mode, float64, with the mistake `variant` switched on."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()
    d_model = x.shape[-1]

    def norm(name, h):
        eps = 1e-6 if variant in (f"{name}_eps_1e-6", "norms_eps_1e-6") else 1e-5
        if variant == "shared_norm1":
            name = "norm1"
        elif variant == "shared_norm2":
            name = "norm2"
        return F.layer_norm(h, (d_model,), s[f"{name}.weight"], s[f"{name}.bias"], eps=eps)

    def attend(h):
        m = mask
        if variant == "ignores_mask":
            m = None
        elif variant == "always_causal" and m is None:
            m = torch.ones(h.shape[1], h.shape[1], dtype=torch.bool).tril()
        return mha(s, h, m, n_heads, prefix="attention.")[0]

    def ff(h):
        hidden = linear(h, s, "ff.0")
        hidden = ACTIVATIONS.get(variant.removeprefix("act_"), F.relu)(hidden) if variant != "gelu" else F.gelu(hidden)
        return linear(hidden, s, "ff.2")

    if variant == "post_ln":
        x = norm("norm1", x + attend(x))
        return norm("norm2", x + ff(x))
    if variant == "residual_from_normed":
        x = norm("norm1", x)
        x = x + attend(x)
        x = norm("norm2", x)
        return x + ff(x)
    if variant in ("attention_output_normed", "ff_output_normed"):  # the norm moved after its sublayer
        x = x + (norm("norm1", attend(x)) if variant == "attention_output_normed" else attend(norm("norm1", x)))
        return x + (norm("norm2", ff(x)) if variant == "ff_output_normed" else ff(norm("norm2", x)))
    h = attend(norm("norm1", x))
    x = h if variant == "no_attention_residual" else x + h
    h = ff(norm("norm1" if variant == "norm1_for_ff" else "norm2", x))
    return h if variant == "no_ff_residual" else x + h


BLOCK_MISTAKES = variants("pre_ln_block", (
    ("your block is Post-LN (it normalises after each residual addition, as the original Transformer did); "
     "this block is Pre-LN: x + attention(norm1(x)), then x + ff(norm2(x))", "post_ln"),
    ("your block has no residual connection around the attention: x = x + dropout(attention(norm1(x), ...))",
     "no_attention_residual"),
    ("your block has no residual connection around the feed-forward: x = x + dropout(ff(norm2(x)))", "no_ff_residual"),
    ("your feed-forward input is normalised with norm1 instead of norm2", "norm1_for_ff"),
    ("your block uses one LayerNorm for both branches (the weights of norm1 in both places)", "shared_norm1"),
    ("your block uses one LayerNorm for both branches (the weights of norm2 in both places)", "shared_norm2"),
    ("your residuals add to the normalised x instead of x itself: keep x, and give norm1(x) only to the attention",
     "residual_from_normed"),
    ("your feed-forward uses GELU; the contract's is ReLU", "gelu"),
    ("your block normalises the attention's output, x + norm1(attention(x)): Pre-LN normalises the sublayer's "
     "input, x + attention(norm1(x))", "attention_output_normed"),
    ("your block normalises the feed-forward's output, x + norm2(ff(x)): Pre-LN normalises the sublayer's input, "
     "x + ff(norm2(x))", "ff_output_normed"),
    ("your block does not pass the mask on to its attention", "ignores_mask"),
    ("your block applies a causal mask when none is given; without a mask every token attends to every other",
     "always_causal"),
    ("your norm1 has eps=1e-6 (timm's and BERT's habit): the contract's is nn.LayerNorm(d_model), eps 1e-5",
     "norm1_eps_1e-6"),
    ("your norm2 has eps=1e-6 (timm's and BERT's habit): the contract's is nn.LayerNorm(d_model), eps 1e-5",
     "norm2_eps_1e-6"),
    ("your norms have eps=1e-6 (timm's and BERT's habit): the contract's are nn.LayerNorm(d_model), eps 1e-5",
     "norms_eps_1e-6"),
))
# A family: the feed-forward's activation another function than the contract's ReLU (GELU is an entry above).
ACTIVATIONS: dict[str, Callable[[Tensor], Tensor]] = {
    "sigmoid": torch.sigmoid, "tanh": torch.tanh, "silu": F.silu, "leaky_relu": F.leaky_relu, "elu": F.elu,
    "identity": lambda t: t}
OTHER_ACTIVATION = mistake(
    "pre_ln_block", "other_activation",
    "your feed-forward's activation is {name}: the contract's is ReLU, nn.Sequential(nn.Linear(d_model, d_ff), "
    "nn.ReLU(), nn.Linear(d_ff, d_model))", dict())
ACTIVATION_WORDS = {"sigmoid": "torch.sigmoid", "tanh": "torch.tanh", "silu": "F.silu", "leaky_relu": "F.leaky_relu",
                    "elu": "F.elu", "identity": "nn.Identity()"}  # code, not prose: the sentence's field


def _activation_family(simulate: Callable[..., Any]) -> Mistakes:
    return {OTHER_ACTIVATION.text(name=words): (lambda v=f"act_{name}": simulate(variant=v))
            for name, words in ACTIVATION_WORDS.items()}


SQUEEZED_BATCH = mistake("pre_ln_block", "squeezed_batch",
                         "your block squeezes a dimension of size 1 away (squeeze(0), or squeeze()): a batch of one "
                         "sequence comes back (B, T, D) too", lambda x: torch.Size(x.shape[1:]))
RESIDUAL_DROPPED = mistake("pre_ln_block", "residual_dropped",
                           "your block drops out the residual stream too (dropout(x + branch)): dropout applies to "
                           "each branch before it is added, x = x + dropout(branch), so that with dropout=1.0 the "
                           "block passes x through unchanged", lambda x: torch.zeros_like(x))
NO_DROPOUT = recognised("pre_ln_block", "no_dropout",
                        "your block never applies dropout: in train mode with dropout=0.5 it gives what eval mode "
                        "gives; drop out each branch with self.dropout before adding it to x")
DROPOUT_IN_EVAL = recognised("pre_ln_block", "dropout_in_eval",
                             "your dropout is still on in eval mode: two calls in eval mode gave different results "
                             "(F.dropout(x, p) drops whatever the mode unless given training=self.training; the "
                             "nn.Dropout submodule follows train() and eval())")
DROPOUT_RATE_IGNORED = mistake(
    "pre_ln_block", "dropout_rate_ignored",
    "your block's dropout does not take the rate it is given: TransformerBlock(..., dropout=1.0) made "
    "nn.Dropout(p={p:g}); pass the argument on, self.dropout = nn.Dropout(dropout)", lambda p: p)


BLOCK_DROPOUT_DEFAULT = recognised("pre_ln_block", "dropout_default",
                                   "your TransformerBlock's dropout defaults to {rate}: the contract's default is "
                                   "dropout=0.1, so a block built without it drops a tenth of each branch in train mode")


def dropout_rate_mistakes(p: Any, asked: float) -> Mistakes:
    """For the rate `p` of the block's `dropout` submodule, built with dropout=`asked`: a number other than it."""
    if isinstance(p, bool) or not isinstance(p, (int, float)) or math.isclose(p, asked):
        return {}
    return bind([DROPOUT_RATE_IGNORED], p, p=p)


ONE_NORM_OBJECT = mistake("pre_ln_block", "one_norm_object",
                          "norm1 and norm2 are the same LayerNorm object: loading norm2's weights overwrote norm1's "
                          "(or the other way round); create two separate nn.LayerNorm(d_model)",
                          lambda state, key: state[key.replace("norm1", "@").replace("norm2", "norm1")
                                                   .replace("@", "norm2")])


# A family: the block's dataflow wired another way, each sublayer reading another tensor in scope (x, norm1(x),
# h = the first residual's sum, the attention's output a): (attention input, first residual, ff input, second
# residual), as written in the sentence. The right wiring is ("norm1(x)", "x + ", "norm2(h)", "h + ").
WIRING = mistake(
    "pre_ln_block", "wiring",
    "your block computes h = {first}attention({attn_in}), then returns {second}ff({ff_in}): the Pre-LN block's "
    "residuals are h = x + attention(norm1(x)), then h + ff(norm2(h)), each sublayer reading the stream it adds to",
    dict())
WIRING_CHOICES = (("norm1(x)", "x", "norm2(x)"), ("x + ", "norm1(x) + ", ""), ("norm2(h)", "norm2(x)", "h", "x", "norm1(h)"),
                  ("h + ", "x + ", "norm2(h) + ", ""))
RIGHT_WIRING = ("norm1(x)", "x + ", "norm2(h)", "h + ")


def wired_block(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                wiring: tuple[str, str, str, str], attended: dict[str, Tensor] | None = None) -> Tensor:
    """The block in eval mode, float64, wired as `wiring` says (WIRING_CHOICES); `attended`: a cache of the
    attention's output for each input (shared by the members of a family, which differ after it)."""
    s = {k: v.double() for k, v in state.items()}
    x = x.double()

    def norm(name: str, t: Tensor) -> Tensor:
        return F.layer_norm(t, (x.shape[-1],), s[f"{name}.weight"], s[f"{name}.bias"], eps=1e-5)

    def ff(t: Tensor) -> Tensor:
        return linear(F.relu(linear(t, s, "ff.0")), s, "ff.2")

    attn_in, first, ff_in, second = wiring
    attended = {} if attended is None else attended
    n1x = norm("norm1", x)
    if attn_in not in attended:
        attended[attn_in] = mha(s, {"norm1(x)": n1x, "x": x}.get(attn_in) if attn_in != "norm2(x)" else
                                norm("norm2", x), mask, n_heads, prefix="attention.")[0]
    a = attended[attn_in]
    h = {"x + ": x + a, "norm1(x) + ": n1x + a, "": a}[first]
    f = ff({"norm2(h)": norm("norm2", h), "norm2(x)": norm("norm2", x), "h": h, "x": x,
            "norm1(h)": norm("norm1", h)}[ff_in])
    return {"h + ": h + f, "x + ": x + f, "norm2(h) + ": norm("norm2", h) + f, "": f}[second]


def _wiring_family(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int) -> Mistakes:
    attended: dict[str, Tensor] = {}
    return {WIRING.text(attn_in=w[0], first=w[1], ff_in=w[2], second=w[3]):
            (lambda w=w: wired_block(state, x, mask, n_heads, w, attended))
            for w in itertools.product(*WIRING_CHOICES) if w != RIGHT_WIRING}


def block_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int, got: Any = None
                   ) -> Mistakes:
    """For the block's output on x (which was `got`); also every other wiring of its dataflow (WIRING), which
    says nothing where it is what a named mistake gives."""
    simulate = lambda **switches: block(state, x, mask, n_heads, **switches)  # noqa: E731
    named = {**simulated(BLOCK_MISTAKES, simulate), **squeeze_mistakes(x)}
    return besides(named, {**_wiring_family(state, x, mask, n_heads), **_activation_family(simulate)}, got)


def block_grad_mistakes(state: dict[str, Tensor], x: Tensor, mask: Tensor | None, n_heads: int,
                        grad_output: Tensor) -> Mistakes:
    """For the gradient of sum(block(x) * grad_output) w.r.t. x: what each named mistake's block gives there (the
    WIRING family, a backward pass each, is weighed on the output only)."""
    def grad_of(variant: str) -> Tensor:
        inputs = x.detach().double().requires_grad_(True)
        with torch.enable_grad():
            out = block(state, inputs, mask, n_heads, variant=variant)
            (grad,) = torch.autograd.grad((out * grad_output.double()).sum(), inputs)
        return grad

    return {entry: (lambda v=entry.model["variant"]: grad_of(v)) for entry in BLOCK_MISTAKES}


def ff_width_mistakes(key: str, d_model: int, n_heads: int, d_ff: int) -> Mistakes:
    """For the shape of state_dict()[key] of TransformerBlock(d_model, n_heads, d_ff): a feed-forward layer sized
    with other widths among the block's (LINEAR_WIDTHS)."""
    want = {"ff.0.weight": ("d_model", "d_ff"), "ff.2.weight": ("d_ff", "d_model")}.get(key)
    if want is None:
        return {}
    widths = {"d_model": d_model, "d_ff": d_ff, "4 * d_model": 4 * d_model, "n_heads": n_heads}
    return linear_width_mistakes(key.removesuffix(".weight"), want, widths)


# A family: one branch not dropped out (self.dropout forgotten around it), seen with dropout=1.0 in train mode.
BRANCH_NOT_DROPPED = mistake(
    "pre_ln_block", "branch_not_dropped",
    "your block does not drop out the branch {term}: with dropout=1.0 in train mode it gave x + {term}; apply "
    "self.dropout to each branch before adding it, x + dropout(branch)", dict())


def dropped_residual_mistakes(x: Tensor, state: dict[str, Tensor] | None = None, n_heads: int = 0) -> Mistakes:
    """For a block's output on x with dropout=1.0 in train mode (which must be x); given the block's weights,
    also one branch kept (BRANCH_NOT_DROPPED)."""
    mistakes = bind([RESIDUAL_DROPPED], x)
    if state is not None:
        s = {k: v.double() for k, v in state.items()}
        xd = x.double()

        def norm(name: str) -> Tensor:
            return F.layer_norm(xd, (xd.shape[-1],), s[f"{name}.weight"], s[f"{name}.bias"], eps=1e-5)
        terms = {"attention(norm1(x))": lambda: xd + mha(s, norm("norm1"), None, n_heads, prefix="attention.")[0],
                 "ff(norm2(x))": lambda: xd + linear(F.relu(linear(norm("norm2"), s, "ff.0")), s, "ff.2")}
        mistakes.update({BRANCH_NOT_DROPPED.text(term=term): model for term, model in terms.items()})
    return mistakes


def squeeze_mistakes(x: Tensor) -> Mistakes:
    """For the shape of a block's output on x (B, T, D)."""
    return bind([SQUEEZED_BATCH], x)


def shared_norm_mistakes(state: dict[str, Tensor], key: str) -> Mistakes:
    """For state_dict()[key] of a norm after loading different norm1 and norm2 weights."""
    return bind([ONE_NORM_OBJECT], state, key)
