"""The known mistakes of `window_attention` (Swin's window attention and block): its entries, simulators and
bundles (see `checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, simulated, variants
from .general import besides


# Swin's WindowAttention and SwinBlock in float64 from plain operations (windows by view/permute, the
# shifted-window mask from region labels), with one mistake `variant` switched on.

def swin_relative_index(ws: int, variant: str = "") -> Tensor:
    """(N, N) int64: (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1), or a mistake's version of it."""
    y, x = torch.arange(ws).repeat_interleave(ws), torch.arange(ws).repeat(ws)
    dy, dx = y[:, None] - y[None, :], x[:, None] - x[None, :]
    if variant == "index_transposed":
        dy, dx = -dy, -dx
    elif variant == "index_axes_swapped":
        dy, dx = dx, dy
    offset = 0 if variant == "index_no_offset" else ws - 1
    stride = {"index_stride_ws": ws, "index_stride_2ws_minus_2": 2 * ws - 2, "index_no_stride": 1,
              "index_stride_2ws": 2 * ws}.get(variant, 2 * ws - 1)
    return (dy + offset) * stride + (dx + offset)


def _swin_partition(x: Tensor, ws: int) -> Tensor:
    B, H, W, C = x.shape
    return x.reshape(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, C)


def _swin_reverse(windows: Tensor, ws: int, H: int, W: int) -> Tensor:
    C = windows.shape[-1]
    return windows.reshape(-1, H // ws, W // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, H, W, C)


def swin_region_mask(H: int, W: int, ws: int, s: int) -> Tensor:
    """Bool (nW, N, N): two tokens of a window of the map rolled by -s come from the same region."""
    def region(n: int) -> Tensor:
        i = torch.arange(n)
        return (i >= n - ws).long() + (i >= n - s).long()

    labels = _swin_partition((region(H)[:, None] * 3 + region(W)[None, :]).reshape(1, H, W, 1), ws)[..., 0]
    return labels[:, :, None] == labels[:, None, :]


def swin_attention(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, mask: Tensor | None = None, *,
                   variant: str = "", prefix: str = "") -> Tensor:
    """WindowAttention's output (B_, N, C) in float64: window b uses mask[b % nW]."""
    w = {k[len(prefix):]: v.double() for k, v in state.items() if k.startswith(prefix)}
    B_, N, C = x.shape
    dh = C // n_heads
    qkv = F.linear(x.double(), w["qkv.weight"], w.get("qkv.bias"))
    if variant == "qkv_heads_first":
        q, k, v = qkv.reshape(B_, N, n_heads, 3, dh).permute(3, 0, 2, 1, 4)
    else:
        q, k, v = (t.reshape(B_, N, n_heads, dh).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
    if variant == "qk_swapped":
        q, k = k, q
    scores = q @ k.transpose(-2, -1) / math.sqrt(C if variant == "scale_channel" else 1 if variant == "unscaled"
                                                 else dh)
    bias = None
    if variant != "no_bias":
        bias = w["relative_position_bias_table"][swin_relative_index(ws, variant)]  # (N, N, H)
        bias = bias.reshape(n_heads, N, N) if variant == "bias_without_permute" else bias.permute(2, 0, 1)
        if variant != "bias_after_softmax":
            scores = scores + bias
    if mask is not None and variant != "mask_ignored":
        nW = mask.shape[0]
        per = mask.repeat_interleave(B_ // nW, 0) if variant == "mask_interleaved" else mask.repeat(B_ // nW, 1, 1)
        per = per[:, None]
        scores = scores + per.double() if variant == "mask_01" else scores.masked_fill(~per, float("-inf"))
    axis = int(variant.removeprefix("softmax_dim_")) if variant.startswith("softmax_dim_") else -1
    weights = scores.softmax(dim=axis)
    if variant == "bias_after_softmax":
        weights = weights + bias
    out = (weights @ v).transpose(1, 2).reshape(B_, N, C)
    return F.linear(out, w["proj.weight"], w.get("proj.bias"))


Roll = tuple[int, tuple[int, ...]]  # (sign of the shift, the dims rolled): (-1, (1, 2)) is roll(y, (-s, -s), (1, 2))


def swin_block(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int, *, variant: str = "",
               rolls: tuple[Roll, Roll] | None = None, mask_of: tuple[int, int] | None = None) -> Tensor:
    """SwinBlock's output (B, H, W, C) in float64; `rolls` (before the windows, after them) replaces the
    contract's ((-1, (1, 2)), (+1, (1, 2))); `mask_of`: the (H, W) of another map whose mask is used."""
    w = {k: v.double() for k, v in state.items()}
    x = x.double()
    _, H, W, C = x.shape

    def norm(t: Tensor, name: str) -> Tensor:
        return F.layer_norm(t, (C,), w[f"{name}.weight"], w[f"{name}.bias"], eps=1e-5)

    first, back = {"roll_wrong_way": (shift, -shift), "rolled_back_same_way": (-shift, -shift)}.get(
        variant, (-shift, shift))
    y = norm(x, "norm1")
    if rolls is not None:
        (sign, dims), after = rolls
        y = torch.roll(y, (sign * shift,) * len(dims), dims) if dims else y
    elif shift:
        y = torch.roll(y, (first, first), dims=(1, 2))
    mask = swin_region_mask(*(mask_of or (H, W)), ws, shift) if shift and variant != "mask_not_passed" else None
    y = _swin_reverse(swin_attention(w, _swin_partition(y, ws), n_heads, ws, mask, variant=variant, prefix="attn."),
                      ws, H, W)
    if rolls is not None:
        sign, dims = after
        y = torch.roll(y, (sign * shift,) * len(dims), dims) if dims else y
    elif shift and variant != "no_roll_back":
        y = torch.roll(y, (back, back), dims=(1, 2))
    x = y if variant == "attention_residual_dropped" else (
        norm(x, "norm1") if variant == "residual_from_normed" else x) + y
    h = x if variant == "mlp_without_norm2" else norm(x - y if variant == "parallel_mlp" else x, "norm2")
    act = F.relu if variant == "relu" else functools.partial(F.gelu, approximate="tanh") if variant == "gelu_tanh" \
        else F.gelu
    mlp = F.linear(act(F.linear(h, w["mlp.0.weight"], w["mlp.0.bias"])), w["mlp.2.weight"], w["mlp.2.bias"])
    return mlp if variant == "mlp_residual_dropped" else x + mlp


SWIN_INDEX_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "index_transposed": "your relative position index is transposed, (yj - yi + ws - 1) * (2ws - 1) + "
                        "(xj - xi + ws - 1): token i's offset from token j is (yi - yj, xi - xj), query minus key",
    "index_no_offset": "your relative position index lacks the ws - 1 offsets: the offsets yi - yj and xi - xj run "
                       "from -(ws - 1) to ws - 1, so add ws - 1 to each before (yi - yj + ws - 1) * (2ws - 1) + "
                       "(xi - xj + ws - 1) (negative indices wrap around to the end of the table)",
    "index_axes_swapped": "your relative position index puts the column offset first, (xi - xj + ws - 1) * (2ws - 1) + "
                          "(yi - yj + ws - 1): the row offset is the major one, as tokens are ordered row-major",
    "index_stride_ws": "your relative position index multiplies the row offset by ws: the column offset takes 2ws - 1 "
                       "values, so the rows of offsets are 2ws - 1 apart, (yi - yj + ws - 1) * (2ws - 1) + ...",
    "index_stride_2ws_minus_2": "your relative position index multiplies the row offset by 2ws - 2, so that offsets "
                                "collide: the column offset takes 2ws - 1 values (from 0 to 2ws - 2 after the "
                                "shift), so the stride is 2ws - 1",
    "index_no_stride": "your relative position index adds the two offsets without multiplying the row offset by "
                       "2ws - 1, so that different offsets share a bias: (yi - yj + ws - 1) * (2ws - 1) + "
                       "(xi - xj + ws - 1)",
    "index_stride_2ws": "your relative position index multiplies the row offset by 2ws: the column offset takes "
                        "2ws - 1 values, so the stride is 2ws - 1 (with 2ws some indices pass the end of the table)",
}.items()))
SWIN_ATTENTION_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "scale_channel": "your scores are divided by √C, the channel width: each head's are divided by √(C / n_heads), "
                     "the width of one head",
    "bias_without_permute": "your bias table[index] of shape (N, N, n_heads) is reshaped to (n_heads, N, N) without "
                            "moving the heads first: permute(2, 0, 1), so that head h adds table[index[i, j], h]",
    "no_bias": "your scores have no relative position bias: add table[index[i, j], h] to head h's score of i and j",
    "bias_after_softmax": "your relative position bias is added to the weights after the softmax: it belongs to the "
                          "scores, softmax(q kᵀ / √(C / n_heads) + bias), so that it shifts which keys get weight and "
                          "each row of weights still sums to 1",
    "qkv_heads_first": "you read qkv's output as (heads, 3, head width) per token: it is q, k, v one after the other "
                       "(C features each), each split into heads as split_heads does",
    "qk_swapped": "your q and k are swapped (the scores transposed before the bias): qkv's output is q, k, v in "
                  "that order",
    "mask_interleaved": "your window b uses mask[b // (B_ / nW)]: the windows of one image come one after the other, "
                        "so window b uses mask[b % nW] (mask.repeat, not repeat_interleave)",
    "mask_01": "you added the bool mask to the scores as 0 and 1: masked pairs need a very negative score "
               "(-inf, or a float mask of 0 and -100 as Swin's code builds), allowed ones get nothing added",
    "unscaled": "your window attention's scores are not divided by √(C / n_heads), the square root of one head's "
                "width",
    # the softmax over another axis than the keys of the (B_, n_heads, N, N) scores
    "softmax_dim_0": "your window attention's weights are a softmax over dim=0, the windows of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
    "softmax_dim_1": "your window attention's weights are a softmax over dim=1, the heads of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
    "softmax_dim_2": "your window attention's weights are a softmax over dim=2, the queries of (B_, n_heads, N, N) "
                     "scores: softmax over the keys, the last dimension (dim=-1)",
}.items()))
SWIN_MASK_IGNORED = mistake("window_attention", "mask_ignored",
                            "your WindowAttention ignores its mask: pairs where mask[b % nW] is False get no weight "
                            "(masked_fill with -inf before the softmax)", dict(variant="mask_ignored"))
MLP_RATIO_IGNORED = mistake("window_attention", "mlp_ratio_ignored",
                            "your MLP's hidden width ignores mlp_ratio (4 * dim): it is int(dim * mlp_ratio)",
                            lambda dim, key: torch.Size({"mlp.0.weight": (4 * dim, dim), "mlp.0.bias": (4 * dim,),
                                                         "mlp.2.weight": (dim, 4 * dim), "mlp.2.bias": (dim,)}[key]))
TABLE_SHAPE_MISTAKES_SWIN = (
    mistake("window_attention", "table_per_token",
            "your table has ws * ws rows, one per token: it has one per relative offset, (2ws - 1) ** 2 "
            "(each of the two offsets runs from -(ws - 1) to ws - 1)", lambda ws, n_heads: torch.Size((ws * ws, n_heads))),
    mistake("window_attention", "table_transposed",
            "your table is (n_heads, (2ws - 1) ** 2): the contract's is ((2ws - 1) ** 2, n_heads), as Swin's "
            "checkpoints hold it", lambda ws, n_heads: torch.Size((n_heads, (2 * ws - 1) ** 2))),
)
SWIN_BLOCK_MISTAKES = variants("window_attention", ((sentence, variant) for variant, sentence in {
    "mask_not_passed": "your shifted windows attend without the shifted-window mask (SwinBlock passes none, or "
                       "WindowAttention ignores it): with shift_size > 0 pass "
                       "shifted_window_mask(H, W, ws, shift_size)",
    "roll_wrong_way": "your block rolls the wrong way: roll by -shift_size before the windows (what the mask "
                      "describes) and by +shift_size after",
    "no_roll_back": "your block does not roll the attention's output back: torch.roll(y, (shift_size, shift_size), "
                    "(1, 2)) after window_reverse",
    "rolled_back_same_way": "your block rolls the output back the same way it rolled the map, by -shift_size twice: "
                            "undo the roll, torch.roll(y, (shift_size, shift_size), (1, 2)) after window_reverse",
    "residual_from_normed": "your first residual adds the attention to norm1(x): it adds it to x itself, "
                            "x = x + attention(norm1(x))",
    "mlp_without_norm2": "your MLP reads x without norm2: the second branch is x + mlp(norm2(x))",
    "parallel_mlp": "your MLP reads the block's input, mlp(norm2(x)) of the x before the attention was added: the "
                    "branches run one after the other, x = x + attention(...), then x + mlp(norm2(x)) of that x",
    "relu": "your MLP uses ReLU: Swin's MLP is Linear, GELU, Linear (nn.GELU())",
    "gelu_tanh": "your MLP uses GELU's tanh approximation (nn.GELU(approximate='tanh')): Swin's MLP uses the "
                 "exact GELU, nn.GELU()",
    "attention_residual_dropped": "your block has no residual connection around the window attention (x = y): "
                                  "x = x + y, y being the attention's output rolled back",
    "mlp_residual_dropped": "your block returns mlp(norm2(x)) without the residual connection: "
                            "return x + mlp(norm2(x))",
}.items()))


def _swin_index_entries(ws: int) -> list[Mistake]:
    """The index mistakes that can be told apart at this window size (for ws = 2 the strides ws and 2ws - 2 agree)."""
    strides = ("index_stride_ws", "index_stride_2ws_minus_2")
    return [m for m in SWIN_INDEX_MISTAKES if not (ws == 2 and m.name in strides)]


def swin_index_mistakes(ws: int) -> Mistakes:
    return simulated(_swin_index_entries(ws), lambda variant: swin_relative_index(ws, variant))


# What an index transposed gives, where the index is right (its own check passes): the bias moved with the
# query and key axes swapped.
BIAS_TRANSPOSED = mistake("window_attention", "bias_transposed",
                          "your bias is transposed, query and key swapped: table[index] is (N, N, n_heads) with the "
                          "query along dim 0 and the key along dim 1; move the heads first with permute(2, 0, 1), "
                          "not transpose(0, 2)", dict(variant="index_transposed"))


def swin_attention_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int,
                            mask: Tensor | None = None, index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """WindowAttention's known mistakes on these inputs. `index_ok` (asked only when the check fails) says
    whether the student's relative_position_index is right: then a mistake of the index is none of theirs,
    and the same output is the bias moved the wrong way."""
    def attention(variant: str) -> Tensor:
        return swin_attention(state, x, n_heads, ws, mask, variant=variant)

    return {**_index_or_bias(ws, attention, index_ok), **simulated([*SWIN_ATTENTION_MISTAKES, SWIN_MASK_IGNORED],
                                                                   attention)}


def _index_or_bias(ws: int, simulate: Callable[[str], Tensor], index_ok: Callable[[], bool] | None) -> Mistakes:
    """The index's mistakes through `simulate(variant)`; where `index_ok()` says the student's index is right,
    instead the bias moved with query and key swapped (which gives what a transposed index gives)."""
    index = simulated(_swin_index_entries(ws), simulate)
    if index_ok is None:
        return index
    ok = functools.cache(index_ok)
    index = {sentence: (lambda model=model: None if ok() else model()) for sentence, model in index.items()}
    return {**index, BIAS_TRANSPOSED: lambda: simulate("index_transposed") if ok() else None}


# A family: any direction and axes of either roll (or none), each pair its own sentence.
ROLLS = mistake(
    "window_attention", "rolls",
    "your block rolls the map with {before} before window_partition and with {after} after window_reverse: "
    "the rolls are torch.roll(y, (-shift_size, -shift_size), dims=(1, 2)) before and torch.roll(y, (shift_size, "
    "shift_size), dims=(1, 2)) after", dict())
# dims=(2, 3) is the (B, C, H, W) habit: on (B, H, W, C) it rolls the columns and the channels
ROLLS_BEFORE: tuple[Roll, ...] = ((-1, (1, 2)), (1, (1, 2)), (0, ()), (-1, (1,)), (-1, (2,)), (-1, (2, 3)))
ROLLS_AFTER: tuple[Roll, ...] = ((1, (1, 2)), (-1, (1, 2)), (0, ()), (1, (1,)), (1, (2,)), (1, (2, 3)))
ROLLS_NAMED = {((-1, (1, 2)), (1, (1, 2))), ((1, (1, 2)), (-1, (1, 2))), ((-1, (1, 2)), (-1, (1, 2))),
               ((-1, (1, 2)), (0, ()))}  # right, roll_wrong_way, rolled_back_same_way, no_roll_back


def _roll_words(roll: Roll) -> str:
    """The roll as code: torch.roll(y, (0, 0), dims=(1, 2)) for none."""
    sign, dims = roll
    if not dims:
        return "torch.roll(y, (0, 0), dims=(1, 2))"
    amount = "-shift_size" if sign < 0 else "shift_size"
    if len(dims) == 1:
        return f"torch.roll(y, {amount}, dims={dims[0]})"
    return f"torch.roll(y, ({amount}, {amount}), dims={dims})"


SWIN_BLOCK_MASK_KEPT = mistake(
    "window_attention", "block_mask_kept",
    "your SwinBlock keeps the mask it made on its first call (as Swin's code keeps one for its one input resolution) "
    "and uses it again for a map of another height and width with as many windows: make "
    "shifted_window_mask(H, W, ws, shift) of each call's own H and W",
    lambda state, x, n_heads, ws, shift, first: swin_block(state, x, n_heads, ws, shift, mask_of=first))


def swin_block_again_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                              first: tuple[int, int], got: Any = None,
                              index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """For SwinBlock called again after a first call on a map of size `first` (H, W); `index_ok` as for
    swin_attention_mistakes."""
    stale = {} if not shift or first == tuple(x.shape[1:3]) else \
        bind([SWIN_BLOCK_MASK_KEPT], state, x, n_heads, ws, shift, first)
    return {**swin_block_mistakes(state, x, n_heads, ws, shift, got, index_ok), **stale}


def swin_block_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                        got: Any = None, index_ok: Callable[[], bool] | None = None) -> Mistakes:
    """For SwinBlock (which gave `got`); with a shift, also every other pair of rolls (ROLLS_BEFORE, ROLLS_AFTER);
    `index_ok` as for swin_attention_mistakes."""
    def block(variant: str) -> Tensor:
        return swin_block(state, x, n_heads, ws, shift, variant=variant)

    named = {**_index_or_bias(ws, block, index_ok), **simulated([*SWIN_ATTENTION_MISTAKES, *SWIN_BLOCK_MISTAKES],
                                                                block)}
    family = {ROLLS.text(before=_roll_words(before), after=_roll_words(after)):
              (lambda r=(before, after): swin_block(state, x, n_heads, ws, shift, rolls=r))
              for before in ROLLS_BEFORE for after in ROLLS_AFTER
              if shift and (before, after) not in ROLLS_NAMED}
    return besides(named, family, got)


def swin_rolled_mistakes(state: dict[str, Tensor], x: Tensor, n_heads: int, ws: int, shift: int,
                         select: Callable[[Tensor], Tensor]) -> Mistakes:
    """For the shifted block on x rolled by +shift, rolled back by -shift and seen through `select`."""
    rolled = torch.roll(x.double(), (shift, shift), dims=(1, 2))
    return simulated([m for m in SWIN_BLOCK_MISTAKES if m.name in ("roll_wrong_way", "no_roll_back",
                                                                   "rolled_back_same_way")],
                     lambda variant: select(torch.roll(swin_block(state, rolled, n_heads, ws, shift, variant=variant),
                                                       (-shift, -shift), (1, 2))))


def swin_block_shape_mistakes(dim: int, mlp_ratio: float, key: str) -> Mistakes:
    if not key.startswith(("mlp.0.", "mlp.2.")) or mlp_ratio == 4.0:
        return {}
    return bind([MLP_RATIO_IGNORED], dim, key)


def swin_table_shape_mistakes(ws: int, n_heads: int) -> Mistakes:
    return bind(TABLE_SHAPE_MISTAKES_SWIN, ws, n_heads)
