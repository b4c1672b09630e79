"""window_attention: `WindowAttention` (with its relative position bias) and `SwinBlock` in swin.py.

Expected values come from formulations written here, in float64, with injected weights (qkv, proj and a
random relative position bias table): the relative position index by loops over the token coordinates of
a window, the bias gathered from the table by the same loops, and each window's attention from PyTorch's
`F.scaled_dot_product_attention` with the bias (and -inf where the mask is False) as its float mask.
SwinBlock is compared with a composition of `F.layer_norm`, `torch.roll`, windows cut and pasted back by
loops over pixel coordinates, Swin's region-label mask built here, that attention and a GELU MLP; then
with properties: a shift of 0 is plain window attention, and a shifted block on an image rolled by the
shift equals the unshifted block wherever a window holds no seam. Masked pairs may get -inf, a constant
at or below -1e9, or Swin's own -100 added: the inputs keep the unmasked scores within a few units, so
-100 leaves them no weight within the tolerance. While these are graded, swin.py's window functions
and attention.py's split_heads / merge_heads are the grader's trusted stand-ins.
"""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import window_attention as mistakes
from checklib.scratch import assert_from_scratch
from checklib.student import expect_value_error
from checklib.weights import layer_norm_state, linear_state, randn
from grader.text import Phrase

WA, BLOCK = adapters.WindowAttention, adapters.SwinBlock
DTYPES = [torch.float32, torch.float64]
INDEX = "index[i, j] = (yi - yj + ws - 1) * (2ws - 1) + (xi - xj + ws - 1) for tokens i = (yi, xi), j = (yj, xj)"
WHERE = ("q, k, v = qkv(x) in that order, split into heads; scores q kᵀ / √(C / n_heads) plus "
         "table[index[i, j], h] for head h; where mask[b % nW] is False no weight; softmax, times v, heads "
         "merged, proj")
IN_PLACE_RESIDUAL = ("forward must not modify the caller's x: add each residual into a new tensor, x = x + y, "
                     "not x += y (an in-place add writes into the tensor the caller passed)")
BLOCK_WHERE = ("y = norm1(x), rolled by -shift_size (when not 0), window_partition, attn with "
               "shifted_window_mask (none without a shift), window_reverse, rolled by +shift_size; x = x + y; "
               "return x + mlp(norm2(x)), mlp = Linear, GELU, Linear")


# --------------------------------------------------------------------------- the checks' own formulations

def coordinates(ws: int) -> list[tuple[int, int]]:
    """(row, column) of each token of a window, row-major."""
    return [(y, x) for y in range(ws) for x in range(ws)]


def relative_index(ws: int) -> Tensor:
    """The contract's (N, N) index, by loops over pairs of token coordinates."""
    coords = coordinates(ws)
    return torch.tensor([[(yi - yj + ws - 1) * (2 * ws - 1) + (xi - xj + ws - 1) for (yj, xj) in coords]
                         for (yi, xi) in coords], dtype=torch.int64)


def index_is_right(module, ws: int, attention: str = "") -> bool:
    """Whether the relative_position_index of a WindowAttention (or of a block's, its attribute `attention`) is
    the formula's: a second look, when a check fails."""
    try:
        got = (module.attr(attention) if attention else module).attr("relative_position_index")
    except Exception:  # noqa: BLE001 - no such buffer, or the code raised: then the index is not known to be right
        return False
    return isinstance(got, Tensor) and got.shape == (ws * ws, ws * ws) and bool((got == relative_index(ws)).all())


def gathered_bias(table: Tensor, ws: int) -> Tensor:
    """(heads, N, N): head h's bias of tokens i, j is table[index of their offset, h], gathered pair by pair."""
    coords = coordinates(ws)
    rows = [torch.stack([table[(yi - yj + ws - 1) * (2 * ws - 1) + (xi - xj + ws - 1)] for (yj, xj) in coords])
            for (yi, xi) in coords]
    return torch.stack(rows).permute(2, 0, 1)


def partition(x: Tensor, ws: int) -> Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C), window by window and pixel by pixel."""
    B, H, W, _ = x.shape
    return torch.stack([torch.stack([x[b, gy * ws + ty, gx * ws + tx] for ty in range(ws) for tx in range(ws)])
                        for b in range(B) for gy in range(H // ws) for gx in range(W // ws)])


def reverse(windows: Tensor, ws: int, H: int, W: int) -> Tensor:
    """The inverse of `partition`: each token written back at its pixel."""
    nW = (H // ws) * (W // ws)
    out = windows.new_empty(windows.shape[0] // nW, H, W, windows.shape[-1])
    for w in range(windows.shape[0]):
        b, g = divmod(w, nW)
        gy, gx = divmod(g, W // ws)
        for t in range(ws * ws):
            ty, tx = divmod(t, ws)
            out[b, gy * ws + ty, gx * ws + tx] = windows[w, t]
    return out


def region_mask(H: int, W: int, ws: int, s: int) -> Tensor:
    """Swin's mask: label each pixel of the rolled map by its row and column slices, compare within windows."""
    def region(i: int, n: int) -> int:
        return 0 if i < n - ws else (1 if i < n - s else 2)

    labels = torch.tensor([[[region(y, H) * 3 + region(x, W)] for x in range(W)] for y in range(H)])[None]
    windows = partition(labels, ws)[..., 0]  # (nW, N)
    return windows[:, :, None] == windows[:, None, :]


def random_mask(nW: int, ws: int, gen) -> Tensor:
    """(nW, N, N) bool, a different pattern for every window, each token allowed to see itself."""
    N = ws * ws
    return (torch.rand(nW, N, N, generator=gen) < 0.6) | torch.eye(N, dtype=torch.bool)


def reference_attention(state: dict, x: Tensor, n_heads: int, ws: int, mask: Tensor | None = None,
                        prefix: str = "") -> Tensor:
    """WindowAttention in float64: one F.scaled_dot_product_attention per window, its float mask the bias."""
    w = {k[len(prefix):]: v.double() for k, v in state.items() if k.startswith(prefix)}
    B_, N, C = x.shape
    dh = C // n_heads
    qkv = F.linear(x.double(), w["qkv.weight"], w["qkv.bias"])
    q, k, v = (qkv[..., i * C:(i + 1) * C].reshape(B_, N, n_heads, dh).transpose(1, 2) for i in range(3))
    bias = gathered_bias(w["relative_position_bias_table"], ws)
    out = []
    for b in range(B_):
        float_mask = bias if mask is None else bias.masked_fill(~mask[b % mask.shape[0]], float("-inf"))
        out.append(F.scaled_dot_product_attention(q[b], k[b], v[b], attn_mask=float_mask))  # scale 1/√dh
    merged = torch.stack(out).transpose(1, 2).reshape(B_, N, C)
    return F.linear(merged, w["proj.weight"], w["proj.bias"])


def mlp(state: dict, x: Tensor) -> Tensor:
    return F.linear(F.gelu(F.linear(x, state["mlp.0.weight"], state["mlp.0.bias"])), state["mlp.2.weight"],
                    state["mlp.2.bias"])


def reference_block(state: dict, x: Tensor, n_heads: int, ws: int, shift: int) -> Tensor:
    """SwinBlock in float64, from torch's own operations and this file's windows and mask."""
    w = {k: v.double() for k, v in state.items()}
    x = x.double()
    _, H, W, C = x.shape
    y = F.layer_norm(x, (C,), w["norm1.weight"], w["norm1.bias"], eps=1e-5)
    if shift:
        y = torch.roll(y, (-shift, -shift), dims=(1, 2))
    mask = region_mask(H, W, ws, shift) if shift else None
    y = reverse(reference_attention(w, partition(y, ws), n_heads, ws, mask, prefix="attn."), ws, H, W)
    if shift:
        y = torch.roll(y, (shift, shift), dims=(1, 2))
    x = x + y
    return x + mlp(w, F.layer_norm(x, (C,), w["norm2.weight"], w["norm2.bias"], eps=1e-5))


# --------------------------------------------------------------------------- weights and the student's modules

def attention_state(dim: int, ws: int, n_heads: int, *, gen, dtype, prefix: str = "") -> dict:
    state = linear_state(prefix + "qkv", dim, 3 * dim, gen=gen, dtype=dtype)
    state.update(linear_state(prefix + "proj", dim, dim, gen=gen, dtype=dtype))
    state[prefix + "relative_position_bias_table"] = randn((2 * ws - 1) ** 2, n_heads, gen=gen, dtype=dtype)
    return state


def block_state(dim: int, n_heads: int, ws: int, mlp_ratio: float, *, gen, dtype) -> dict:
    hidden = int(dim * mlp_ratio)
    state = attention_state(dim, ws, n_heads, gen=gen, dtype=dtype, prefix="attn.")
    state.update(layer_norm_state("norm1", dim, gen=gen, dtype=dtype))
    state.update(layer_norm_state("norm2", dim, gen=gen, dtype=dtype))
    state.update(linear_state("mlp.0", dim, hidden, gen=gen, dtype=dtype))
    state.update(linear_state("mlp.2", hidden, dim, gen=gen, dtype=dtype))
    return state


def loaded(module, state: dict):
    if next(iter(state.values())).dtype == torch.float64:
        module.to(torch.float64)
    module.load_weights(state)
    return module


def block_call(dim, n_heads, ws, shift, mlp_ratio) -> str:
    return f"SwinBlock({dim}, {n_heads}, {ws}, shift_size={shift}" + (
        f", mlp_ratio={mlp_ratio:g})" if mlp_ratio != 4.0 else ")")


def layout_problem(got: dict, shapes: dict, optional: dict) -> str | None:
    """What is wrong with the state dict's keys, if anything (the keys of `optional` may be absent)."""
    missing, extra = sorted(set(shapes) - set(got)), sorted(set(got) - set(shapes) - set(optional))
    return Phrase("missing keys {missing}, unexpected keys {extra}", missing=missing, extra=extra) if missing or extra else None


# --------------------------------------------------------------------------- WindowAttention.__init__

@pytest.mark.parametrize("dim, ws, n_heads", [(16, 4, 2), (12, 3, 3), (8, 7, 1)], ids=lambda v: str(v))
def test_state_dict_layout(impl, dim, ws, n_heads):
    m = WA(impl, dim, ws, n_heads)
    got = m.state_dict()
    N = ws * ws
    shapes = {"qkv.weight": (3 * dim, dim), "qkv.bias": (3 * dim,), "proj.weight": (dim, dim), "proj.bias": (dim,),
              "relative_position_bias_table": ((2 * ws - 1) ** 2, n_heads)}
    optional = {"relative_position_index": (N, N)}
    what = f"WindowAttention({dim}, {ws}, {n_heads}).state_dict()"
    hint = ("qkv = nn.Linear(dim, 3 * dim), proj = nn.Linear(dim, dim), relative_position_bias_table = "
            "nn.Parameter of shape ((2ws - 1) ** 2, n_heads), and the index as a buffer (persistent or not)")
    problem = layout_problem(got, shapes, optional)
    if problem:
        fail(what, problem, hint=hint)
    for key, shape in {**shapes, **{k: v for k, v in optional.items() if k in got}}.items():
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape,
                     dtype=torch.int64 if key == "relative_position_index" else torch.float32, hint=hint,
                     mistakes=mistakes.swin_table_shape_mistakes(ws, n_heads)
                     if key == "relative_position_bias_table" else None)
    info = m.tensor_info("relative_position_bias_table")
    if not info["requires_grad"]:
        fail(f"WindowAttention({dim}, {ws}, {n_heads}).relative_position_bias_table",
             "expected an nn.Parameter (learned, requires_grad), got a tensor that does not require grad",
             hint="wrap the table in nn.Parameter so that the optimizer learns it; the index is the buffer")


@pytest.mark.parametrize("ws", [2, 3, 4, 7])
def test_relative_position_index(impl, ws):
    got = WA(impl, 2 * ws, ws, 2).attr("relative_position_index")
    N = ws * ws
    what = f"WindowAttention({2 * ws}, {ws}, 2).relative_position_index"
    check_tensor(got, what=what, shape=(N, N), dtype=torch.int64,
                 hint="an int64 buffer (register_buffer) of shape (ws * ws, ws * ws), tokens row-major in the window")
    assert_equal(got, relative_index(ws), what=Phrase('{what} vs the formula, pair by pair', what=what), hint=INDEX,
                 mistakes=mistakes.swin_index_mistakes(ws))


# --------------------------------------------------------------------------- WindowAttention.forward

# (name, batch of images, window, dim, heads, mask kind, the map the "swin" mask is made for)
ATTENTION_CASES = [
    ("ws2-C8-H2-nomask", 4, 2, 8, 2, "none", None),
    ("ws3-C12-H3-nomask", 3, 3, 12, 3, "none", None),
    ("ws7-C8-H2-nomask", 2, 7, 8, 2, "none", None),
    ("ws4-C16-H4-swin8x8-shift2", 2, 4, 16, 4, "swin", (8, 8, 2)),
    ("ws3-C12-H2-swin6x9-shift1", 2, 3, 12, 2, "swin", (6, 9, 1)),
    ("ws2-C8-H2-random-nW3", 3, 2, 8, 2, "random", 3),
    ("ws3-C6-H1-random-nW2", 3, 3, 6, 1, "random", 2),
    ("ws4-C16-H2-swin8x12-shift3", 1, 4, 16, 2, "swin", (8, 12, 3)),
]
ATTENTION_PARAMS = [(*case, DTYPES[i % 2]) for i, case in enumerate(ATTENTION_CASES)]


@pytest.mark.parametrize("name, batch, ws, dim, n_heads, kind, detail, dtype", ATTENTION_PARAMS,
                         ids=[f"{c[0]}-{str(c[-1])[6:]}" for c in ATTENTION_PARAMS])
def test_matches_sdpa_per_window(impl, gen, name, batch, ws, dim, n_heads, kind, detail, dtype):
    mask = None
    if kind == "swin":
        mask = region_mask(detail[0], detail[1], ws, detail[2])
    elif kind == "random":
        mask = random_mask(detail, ws, gen)
    windows = batch * (1 if mask is None else mask.shape[0])
    state = attention_state(dim, ws, n_heads, gen=gen, dtype=dtype)
    x = randn(windows, ws * ws, dim, gen=gen, dtype=dtype)
    m = loaded(WA(impl, dim, ws, n_heads), state)
    got = m(x) if mask is None else m(x, mask)
    shown = "" if mask is None else Phrase(', mask bool {tuple_mask_shape}', tuple_mask_shape=tuple(mask.shape))
    assert_close(got, reference_attention(state, x, n_heads, ws, mask).to(dtype),
                 what=Phrase("WindowAttention({dim}, {ws}, {n_heads})(x {tuple_x_shape}{shown}) vs "
                             "F.scaled_dot_product_attention per window, the bias gathered pair by pair as its "
                             "float mask", dim=dim, ws=ws, n_heads=n_heads, tuple_x_shape=tuple(x.shape),
                             shown=shown),
                 hint=WHERE, mistakes=mistakes.swin_attention_mistakes(
                     state, x, n_heads, ws, mask, index_ok=lambda: index_is_right(m, ws)))


def test_bias_table_learns(impl, gen):
    """The table is a learned parameter: its gradient is the one backpropagation through the bias gives."""
    dim, ws, n_heads = 8, 3, 2
    state = attention_state(dim, ws, n_heads, gen=gen, dtype=torch.float64)
    mask = region_mask(6, 6, ws, 1)
    x = randn(2 * mask.shape[0], ws * ws, dim, gen=gen, dtype=torch.float64)
    grad_output = randn(*x.shape, gen=gen, dtype=torch.float64)
    m = loaded(WA(impl, dim, ws, n_heads), state)
    grads = m.grad(x, mask, grad_output=grad_output)["params"]
    table = state["relative_position_bias_table"].clone().requires_grad_(True)
    (reference_attention({**state, "relative_position_bias_table": table}, x, n_heads, ws, mask)
     * grad_output).sum().backward()
    got = grads.get("relative_position_bias_table")
    what = "the gradient of WindowAttention's relative_position_bias_table"
    if got is None:
        fail(what, "expected a gradient, got none: the table does not take part in the forward's autograd graph",
             hint="index the nn.Parameter itself (table[index]) inside forward, without .data or torch.no_grad()")
    assert_close(got, table.grad, what=Phrase('{what} vs autograd through the reference', what=what), hint=WHERE)


def test_leaves_inputs_alone(impl, gen):
    """Functions never modify their inputs: WindowAttention its windows and mask, a shifted SwinBlock its map."""
    dim, ws, n_heads = 8, 2, 2
    mask = random_mask(2, ws, gen)
    x = randn(4, ws * ws, dim, gen=gen)
    m = loaded(WA(impl, dim, ws, n_heads), attention_state(dim, ws, n_heads, gen=gen, dtype=torch.float32))
    _, after = m.call_returning_args(x, mask)
    assert_close(after[0], x, what="x after WindowAttention's forward", hint="forward must not modify x")
    assert_equal(after[1], mask, what="mask after WindowAttention's forward", hint="forward must not modify mask")
    block = loaded(BLOCK(impl, dim, n_heads, ws, 1), block_state(dim, n_heads, ws, 4.0, gen=gen, dtype=torch.float32))
    image = randn(2, 2 * ws, 3 * ws, dim, gen=gen)
    _, (after_block,) = block.call_returning_args(image)
    call = block_call(dim, n_heads, ws, 1, 4.0)
    assert_close(after_block, image, what=Phrase("x {tuple_image_shape} after {call}'s forward",
                                                 tuple_image_shape=tuple(image.shape), call=call), hint=IN_PLACE_RESIDUAL)


# --------------------------------------------------------------------------- SwinBlock

@pytest.mark.parametrize("dim, n_heads, ws, mlp_ratio", [(16, 2, 4, 4.0), (12, 3, 3, 2.0), (8, 2, 2, 1.5)],
                         ids=lambda v: str(v))
def test_block_state_dict_layout(impl, dim, n_heads, ws, mlp_ratio):
    got = BLOCK(impl, dim, n_heads, ws, 1, mlp_ratio=mlp_ratio).state_dict()
    hidden = int(dim * mlp_ratio)
    shapes = {"norm1.weight": (dim,), "norm1.bias": (dim,), "norm2.weight": (dim,), "norm2.bias": (dim,),
              "attn.qkv.weight": (3 * dim, dim), "attn.qkv.bias": (3 * dim,), "attn.proj.weight": (dim, dim),
              "attn.proj.bias": (dim,), "attn.relative_position_bias_table": ((2 * ws - 1) ** 2, n_heads),
              "mlp.0.weight": (hidden, dim), "mlp.0.bias": (hidden,), "mlp.2.weight": (dim, hidden),
              "mlp.2.bias": (dim,)}
    optional = {"attn.relative_position_index": (ws * ws, ws * ws)}
    what = f"{block_call(dim, n_heads, ws, 1, mlp_ratio)}.state_dict()"
    hint = ("norm1, norm2 = nn.LayerNorm(dim); attn = WindowAttention(dim, window_size, n_heads); mlp = "
            "nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(), nn.Linear(int(dim * mlp_ratio), dim))")
    problem = layout_problem(got, shapes, optional)
    if problem:
        fail(what, problem, hint=hint)
    for key, shape in shapes.items():
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape, dtype=torch.float32, hint=hint,
                     mistakes=mistakes.swin_block_shape_mistakes(dim, mlp_ratio, key))


# (batch, H, W, dim, heads, window, shift, mlp_ratio): non-square maps, shifts from 1 to ws - 1, Swin's 7x7
BLOCK_CASES = [(2, 8, 12, 16, 2, 4, 0, 4.0), (2, 8, 12, 16, 2, 4, 2, 4.0), (1, 6, 9, 12, 3, 3, 1, 2.0),
               (2, 12, 8, 8, 2, 4, 1, 4.0), (1, 6, 6, 8, 4, 3, 2, 1.5), (1, 14, 7, 8, 2, 7, 3, 4.0),
               (1, 4, 6, 8, 2, 2, 0, 2.0), (2, 9, 6, 12, 2, 3, 2, 4.0)]
BLOCK_PARAMS = [(*case, DTYPES[i % 2]) for i, case in enumerate(BLOCK_CASES)]


def block_id(case) -> str:
    b, h, w, d, n, ws, s, r, dtype = case
    return f"B{b}-{h}x{w}-C{d}-H{n}-ws{ws}-shift{s}-mlp{r:g}-{str(dtype)[6:]}"


@pytest.mark.parametrize("batch, H, W, dim, n_heads, ws, shift, mlp_ratio, dtype", BLOCK_PARAMS,
                         ids=[block_id(c) for c in BLOCK_PARAMS])
def test_block_matches_composition(impl, gen, batch, H, W, dim, n_heads, ws, shift, mlp_ratio, dtype):
    state = block_state(dim, n_heads, ws, mlp_ratio, gen=gen, dtype=dtype)
    x = randn(batch, H, W, dim, gen=gen, dtype=dtype)
    m = loaded(BLOCK(impl, dim, n_heads, ws, shift, mlp_ratio=mlp_ratio), state)
    got = m(x)
    assert_close(got, reference_block(state, x, n_heads, ws, shift).to(dtype),
                 what=Phrase("{block_call_dim_n_heads_ws_shift_mlp_ratio}(x {tuple_x_shape}) vs F.layer_norm, "
                             "torch.roll, windows by loops, Swin's region mask, per-window SDPA and a GELU MLP",
                             block_call_dim_n_heads_ws_shift_mlp_ratio=block_call(dim, n_heads, ws, shift, mlp_ratio),
                             tuple_x_shape=tuple(x.shape)),
                 hint=BLOCK_WHERE, mistakes=mistakes.swin_block_mistakes(
                     state, x, n_heads, ws, shift, got, index_ok=lambda: index_is_right(m, ws, "attn")))


# The same block called again and again: other images of the same size, and maps of other heights and widths with
# as many windows (6 of 4 x 4). Nothing one call keeps (a mask made on the first call, as Swin's code makes one for
# its one input resolution) may change another call's answer.
AGAIN_MAPS = [(8, 12), (12, 8), (8, 12), (4, 24)]


@pytest.mark.parametrize("shift", [2, 0], ids=lambda s: f"shift{s}")
def test_same_block_called_again(impl, gen, shift):
    dim, n_heads, ws = 8, 2, 4
    state = block_state(dim, n_heads, ws, 2.0, gen=gen, dtype=torch.float32)
    m = loaded(BLOCK(impl, dim, n_heads, ws, shift, mlp_ratio=2.0), state)
    for call, (H, W) in enumerate(AGAIN_MAPS, 1):
        x = randn(2, H, W, dim, gen=gen)
        what = (Phrase("call {call} of the same {block_call_dim_n_heads_ws_shift_2_0}, x {tuple_x_shape}, after "
                       "maps of {AGAIN_MAPS_0_0} x {AGAIN_MAPS_0_1} and others", call=call,
                       block_call_dim_n_heads_ws_shift_2_0=block_call(dim, n_heads, ws, shift, 2.0),
                       tuple_x_shape=tuple(x.shape), AGAIN_MAPS_0_0=AGAIN_MAPS[0][0],
                       AGAIN_MAPS_0_1=AGAIN_MAPS[0][1]))
        got = m(x)
        assert_close(got, reference_block(state, x, n_heads, ws, shift).float(), what=what,
                     hint="one block sees maps of several sizes: make each call's mask for its own H and W, and keep "
                          "nothing from one call to the next",
                     mistakes=mistakes.swin_block_again_mistakes(
                         state, x, n_heads, ws, shift, AGAIN_MAPS[0], got, index_ok=lambda: index_is_right(m, ws, "attn")))


@pytest.mark.parametrize("batch, H, W, dim, n_heads, ws", [(2, 8, 12, 16, 2, 4), (1, 6, 9, 12, 3, 3)],
                         ids=lambda v: str(v))
def test_shift_zero_is_plain_window_attention(impl, gen, batch, H, W, dim, n_heads, ws):
    """Without a shift the block's attention is WindowAttention of each window of norm1(x), no mask."""
    state = block_state(dim, n_heads, ws, 4.0, gen=gen, dtype=torch.float64)
    x = randn(batch, H, W, dim, gen=gen, dtype=torch.float64)
    block = loaded(BLOCK(impl, dim, n_heads, ws, 0), state)
    attn = loaded(WA(impl, dim, ws, n_heads), {k[5:]: v for k, v in state.items() if k.startswith("attn.")})
    normed = F.layer_norm(x, (dim,), state["norm1.weight"], state["norm1.bias"], eps=1e-5)
    h = x + reverse(attn(partition(normed, ws)), ws, H, W)
    expected = h + mlp(state, F.layer_norm(h, (dim,), state["norm2.weight"], state["norm2.bias"], eps=1e-5))
    assert_close(block(x), expected,
                 what=Phrase("SwinBlock({dim}, {n_heads}, {ws}, shift_size=0)(x {tuple_x_shape}) vs your own "
                             "WindowAttention (same weights) on the windows of norm1(x), then the MLP", dim=dim,
                             n_heads=n_heads, ws=ws, tuple_x_shape=tuple(x.shape)),
                 hint="with shift_size=0 there is no roll and no mask: partition, attend, reverse",
                 mistakes=mistakes.swin_block_mistakes(state, x, n_heads, ws, 0,
                                                       index_ok=lambda: index_is_right(block, ws, "attn")))


@pytest.mark.parametrize("batch, H, W, dim, n_heads, ws, shift", [(2, 12, 8, 16, 2, 4, 2), (1, 9, 6, 12, 3, 3, 1),
                                                                    (1, 6, 9, 8, 2, 3, 2)], ids=lambda v: str(v))
def test_shifted_block_on_rolled_image(impl, gen, batch, H, W, dim, n_heads, ws, shift):
    """Shifting the windows is rolling the image: a shifted block on x rolled by +s, rolled back by -s, equals the
    unshifted block on x in every window of x away from the last row and column of windows, where no seam lies
    (and the mask is all True)."""
    state = block_state(dim, n_heads, ws, 4.0, gen=gen, dtype=torch.float64)
    x = randn(batch, H, W, dim, gen=gen, dtype=torch.float64)
    shifted = loaded(BLOCK(impl, dim, n_heads, ws, shift), state)
    plain = loaded(BLOCK(impl, dim, n_heads, ws, 0), state)
    rows, cols = H - ws, W - ws  # the windows that hold no seam

    def inner(t: Tensor) -> Tensor:
        return t[:, :rows, :cols]

    got = shifted(torch.roll(x, (shift, shift), dims=(1, 2)))
    check_tensor(got, what=f"SwinBlock({dim}, {n_heads}, {ws}, shift_size={shift})(x {tuple(x.shape)})",
                 shape=x.shape, dtype=torch.float64, hint=BLOCK_WHERE)
    assert_close(inner(torch.roll(got, (-shift, -shift), dims=(1, 2))), inner(plain(x)),
                 what=Phrase("SwinBlock(..., shift_size={shift}) on x rolled by +{shift}, rolled back, vs "
                             "SwinBlock(..., shift_size=0) on x, pixels [:{rows}, :{cols}] (windows without a seam)",
                             shift=shift, rows=rows, cols=cols),
                 hint="a shifted block rolls norm1(x) by -shift_size, attends in the windows, and rolls the result "
                      "back by +shift_size: on an image rolled by +shift_size its windows are the unshifted ones",
                 mistakes=mistakes.swin_rolled_mistakes(state, x, n_heads, ws, shift, inner))


@pytest.mark.parametrize("H, W, ws, shift", [(6, 8, 4, 0), (8, 6, 4, 2), (9, 7, 3, 1)], ids=lambda v: str(v))
def test_block_rejects_maps_not_divisible(impl, gen, H, W, ws, shift):
    dim = 8
    m = BLOCK(impl, dim, 2, ws, shift)
    x = randn(1, H, W, dim, gen=gen)
    message = expect_value_error(m, x, what=f"SwinBlock({dim}, 2, {ws}, shift_size={shift})(x {tuple(x.shape)})")
    assert message, "the ValueError should say what is wrong: H and W must be multiples of window_size"


def test_from_scratch(target_folder):
    """No library attention (course.yml lists it): the scores, bias, mask and softmax are written here."""
    assert_from_scratch(target_folder, "window_attention")
