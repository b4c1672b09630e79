"""swin_windows: `window_partition`, `window_reverse`, `shifted_window_mask` in swin.py.

PyTorch has no Swin windows (torchvision's do not load beside this torch). The expected
values are built here by brute force: explicit loops over the window and pixel coordinates
for the partition and its inverse, and for the mask Swin's own construction (a label map
filled slice by slice with the official negative slices, compared token by token) and a
second one from the rolled coordinates alone (two tokens may attend when the roll left the
offset between them as it was). The functions move values without computing any, so every
comparison is exact.

No case of the core checks has a single column of windows or windows of one pixel: there
the partition is a plain reshape, which code that does no work gets right.
"""
from __future__ import annotations

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_equal, check_tensor, fail
from checklib.mistakes import swin_windows as mistakes
from checklib.mistakes.general import FLOAT_DTYPE_CHANGED
from checklib.student import expect_value_error
from checklib.weights import randn
from grader.sandbox.protocol import StudentError, StudentTimeout
from grader.text import Phrase

ORDER = ("windows ordered by image, then row-major over the grid of windows (window n at grid row n // (W/ws), "
         "grid column n % (W/ws)); tokens row-major inside a window (token t at row t // ws, column t % ws)")
MASK = ("mask[n, i, j] is True when tokens i and j of window n of the map rolled by -shift_size carry the same "
        "label, the label being (row slice, column slice) among [0, H - ws), [H - ws, H - s), [H - s, H)")


def values(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Distinct-looking values of `dtype`: random floats, or random integers far apart."""
    if dtype.is_floating_point:
        return randn(*shape, gen=gen, dtype=dtype, scale=3.0)
    return torch.randint(-10**6, 10**6, shape, generator=gen).to(dtype)


# --- the brute-force formulations ----------------------------------------------------------------------

def partition_loops(x: torch.Tensor, ws: int) -> torch.Tensor:
    """(B, H, W, C) -> (B * nW, ws * ws, C), one pixel at a time."""
    B, H, W, C = x.shape
    gh, gw = H // ws, W // ws
    out = torch.empty(B * gh * gw, ws * ws, C, dtype=x.dtype)
    for b in range(B):
        for gr in range(gh):
            for gc in range(gw):
                window = b * gh * gw + gr * gw + gc
                for r in range(ws):
                    for c in range(ws):
                        out[window, r * ws + c] = x[b, gr * ws + r, gc * ws + c]
    return out


def reverse_loops(windows: torch.Tensor, ws: int, H: int, W: int) -> torch.Tensor:
    """(B * nW, ws * ws, C) -> (B, H, W, C), one pixel at a time."""
    gh, gw = H // ws, W // ws
    B, C = windows.shape[0] // (gh * gw), windows.shape[-1]
    out = torch.empty(B, H, W, C, dtype=windows.dtype)
    for b in range(B):
        for row in range(H):
            for col in range(W):
                window = b * gh * gw + (row // ws) * gw + col // ws
                out[b, row, col] = windows[window, (row % ws) * ws + col % ws]
    return out


def swin_labels_mask(H: int, W: int, ws: int, s: int) -> torch.Tensor:
    """Swin's construction: a label per region of the rolled map (the official slices), then every pair of
    tokens of every window compared one by one."""
    img_mask = torch.zeros(1, H, W, 1)
    if s > 0:
        h_slices = (slice(0, -ws), slice(-ws, -s), slice(-s, None))
        w_slices = (slice(0, -ws), slice(-ws, -s), slice(-s, None))
        cnt = 0
        for h in h_slices:
            for w in w_slices:
                img_mask[:, h, w, :] = cnt
                cnt += 1
    labels = partition_loops(img_mask, ws)[..., 0].tolist()  # (nW, N)
    return torch.tensor([[[a == b for b in window] for a in window] for window in labels], dtype=torch.bool)


def rolled_coordinates_mask(H: int, W: int, ws: int, s: int) -> torch.Tensor:
    """From the rolled map's coordinates only: position (r, c) of the map rolled by -s holds pixel
    ((r + s) % H, (c + s) % W) of the image; two tokens of a window may attend when the roll kept the
    offset between them, i.e. they are neighbours in the image as they are in the window."""
    gh, gw, N = H // ws, W // ws, ws * ws
    token = torch.arange(N)
    rows = (torch.arange(gh)[:, None, None] * ws + token // ws).expand(gh, gw, N).reshape(-1, N)  # (nW, N)
    cols = (torch.arange(gw)[None, :, None] * ws + token % ws).expand(gh, gw, N).reshape(-1, N)

    def kept(coord: torch.Tensor, size: int) -> torch.Tensor:  # (nW, N, N): the roll kept the offset i - j
        return ((coord + s) % size)[:, :, None] - ((coord + s) % size)[:, None, :] == coord[:, :, None] - coord[:, None, :]

    mask = kept(rows, H) & kept(cols, W)
    return mask


# --- calls ---------------------------------------------------------------------------------------------

def call_partition(impl, x: torch.Tensor, ws: int) -> torch.Tensor:
    B, H, W, C = x.shape
    what = f"window_partition(x {tuple(x.shape)} {str(x.dtype)[6:]}, {ws})"
    out = adapters.window_partition(impl)(x, ws)
    check_tensor(out, what=what, shape=(B * (H // ws) * (W // ws), ws * ws, C),
                 hint="(B, H, W, C) -> (B * nW, ws * ws, C) with nW = (H / ws) * (W / ws): one row per window, "
                      "ws * ws tokens each", mistakes=mistakes.partition_mistakes(x, ws))
    if out.dtype != x.dtype:
        fail(what, Phrase("expected dtype {x_dtype}, got {out_dtype}", x_dtype=x.dtype, out_dtype=out.dtype), actual=out.dtype,
             hint="the windows hold x's own values: keep its dtype (no float(), no new tensor of another dtype)",
             mistakes={FLOAT_DTYPE_CHANGED: out.dtype})
    return out


def call_reverse(impl, windows: torch.Tensor, ws: int, H: int, W: int) -> torch.Tensor:
    B = windows.shape[0] // ((H // ws) * (W // ws))
    what = Phrase("window_reverse(windows {tuple_windows_shape} {str_windows_dtype_6}, {ws}, H={H}, W={W})",
                  tuple_windows_shape=tuple(windows.shape), str_windows_dtype_6=str(windows.dtype)[6:], ws=ws, H=H,
                  W=W)
    out = adapters.window_reverse(impl)(windows, ws, H, W)
    check_tensor(out, what=what, shape=(B, H, W, windows.shape[-1]),
                 hint="(B * nW, ws * ws, C) -> (B, H, W, C), B = windows.shape[0] // nW",
                 mistakes=mistakes.reverse_mistakes(windows, ws, H, W))
    if out.dtype != windows.dtype:
        fail(what, Phrase("expected dtype {windows_dtype}, got {out_dtype}", windows_dtype=windows.dtype,
                          out_dtype=out.dtype), actual=out.dtype,
             hint="the map holds the windows' own values: keep their dtype", mistakes={FLOAT_DTYPE_CHANGED: out.dtype})
    return out


def call_mask(impl, H: int, W: int, ws: int, s: int) -> torch.Tensor:
    N = ws * ws
    what = f"shifted_window_mask({H}, {W}, {ws}, {s})"
    out = adapters.shifted_window_mask(impl)(H, W, ws, s)
    check_tensor(out, what=what, shape=((H // ws) * (W // ws), N, N), dtype=torch.bool,
                 hint="a bool tensor (nW, ws * ws, ws * ws), True where two tokens may attend",
                 mistakes=mistakes.mask_dtype_mistakes(H, W, ws, s))
    return out


# --- window_partition ----------------------------------------------------------------------------------

# (B, H, W, C, ws, dtype): square and non-square maps (H > W and H < W), one row of windows, windows of
# 2, 3, 4 and Swin's 7 pixels, one channel and several; never one column of windows, nor ws = 1.
CASES = [
    (2, 4, 6, 3, 2, torch.float64),
    (2, 6, 4, 2, 2, torch.float32),
    (1, 4, 4, 1, 2, torch.float32),
    (3, 8, 8, 5, 4, torch.float32),
    (1, 6, 9, 2, 3, torch.int64),
    (2, 12, 8, 1, 4, torch.float64),
    (1, 7, 14, 3, 7, torch.float32),
    (2, 14, 14, 4, 7, torch.float32),
]
IDS = [f"{b}x{h}x{w}x{c}-ws{ws}-{str(d)[6:]}" for b, h, w, c, ws, d in CASES]


@pytest.mark.parametrize("B, H, W, C, ws, dtype", CASES, ids=IDS)
def test_window_partition_matches_loops(impl, gen, B, H, W, C, ws, dtype):
    x = values((B, H, W, C), dtype, gen)
    out = call_partition(impl, x, ws)
    assert_equal(out, partition_loops(x, ws), what=Phrase("window_partition(x {tuple_x_shape}, {ws}) against the "
                                                          "pixels copied one by one", tuple_x_shape=tuple(x.shape),
                                                          ws=ws), hint=ORDER, mistakes=mistakes.partition_mistakes(x, ws))


@pytest.mark.parametrize("B, H, W, C, ws, dtype", CASES, ids=IDS)
def test_window_reverse_matches_loops(impl, gen, B, H, W, C, ws, dtype):
    windows = values((B * (H // ws) * (W // ws), ws * ws, C), dtype, gen)
    out = call_reverse(impl, windows, ws, H, W)
    assert_equal(out, reverse_loops(windows, ws, H, W), what=Phrase("window_reverse(windows {tuple_windows_shape}, "
                                                                    "{ws}, H={H}, W={W}) against the pixels put "
                                                                    "back one by one",
                                                                    tuple_windows_shape=tuple(windows.shape), ws=ws,
                                                                    H=H, W=W),
                 hint="the inverse of window_partition: " + ORDER,
                 mistakes=mistakes.reverse_mistakes(windows, ws, H, W))


def test_windows_ordered_by_image_then_row_major(impl):
    """Every pixel carries its coordinates (image, row, column): each window must hold its own square."""
    B, H, W, ws = 2, 6, 9, 3
    b, r, c = torch.meshgrid(torch.arange(B), torch.arange(H), torch.arange(W), indexing="ij")
    x = torch.stack((b, r, c), dim=-1)  # (B, H, W, 3) int64
    out = call_partition(impl, x, ws)
    gh, gw = H // ws, W // ws
    for window in range(B * gh * gw):
        image, n = divmod(window, gh * gw)
        for t in range(ws * ws):
            want = [image, (n // gw) * ws + t // ws, (n % gw) * ws + t % ws]
            got = out[window, t].tolist()
            if got != want:
                fail(Phrase("window_partition of a {H} x {W} map whose pixels hold (image, row, column), ws={ws}",
                            H=H, W=W, ws=ws),
                     Phrase("token {t} of window {window} should be pixel {tuple_want}, got pixel {tuple_got}", t=t,
                            window=window, tuple_want=tuple(want), tuple_got=tuple(got)),
                     hint=ORDER, actual=out, mistakes=mistakes.partition_mistakes(x, ws))


# (B, H, W, C, ws): the identity both ways, square and not, ws = 1 and a single window included.
ROUND_TRIPS = [(2, 4, 6, 3, 2), (1, 9, 6, 2, 3), (3, 8, 8, 1, 4), (2, 5, 10, 2, 5), (1, 3, 3, 4, 3),
               (2, 4, 2, 2, 1), (1, 14, 7, 3, 7)]


@pytest.mark.parametrize("B, H, W, C, ws", ROUND_TRIPS, ids=lambda v: str(v))
def test_partition_then_reverse_is_identity(impl, gen, B, H, W, C, ws):
    x = randn(B, H, W, C, gen=gen, dtype=torch.float64)
    windows = call_partition(impl, x, ws)
    back = call_reverse(impl, windows, ws, H, W)
    assert_equal(back, x, what=f"window_reverse(window_partition(x {tuple(x.shape)}, {ws}), {ws}, {H}, {W})",
                 hint="window_reverse undoes window_partition exactly: every pixel goes back where it came from")


@pytest.mark.parametrize("B, H, W, C, ws", ROUND_TRIPS, ids=lambda v: str(v))
def test_reverse_then_partition_is_identity(impl, gen, B, H, W, C, ws):
    windows = randn(B * (H // ws) * (W // ws), ws * ws, C, gen=gen, dtype=torch.float64)
    x = call_reverse(impl, windows, ws, H, W)
    again = call_partition(impl, x, ws)
    assert_equal(again, windows, what=Phrase("window_partition(window_reverse(windows {tuple_windows_shape}, {ws}, "
                                             "{H}, {W}), {ws})", tuple_windows_shape=tuple(windows.shape), ws=ws,
                                             H=H, W=W), hint="window_partition undoes window_reverse exactly: the same windows come back")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                                   torch.bool], ids=lambda d: str(d)[6:])
def test_dtype_kept(impl, gen, dtype):
    B, H, W, C, ws = 2, 4, 6, 3, 2
    x = values((B, H, W, C), torch.float64 if dtype == torch.bool else dtype, gen)
    x = x > 0 if dtype == torch.bool else x
    windows = call_partition(impl, x, ws)
    assert_equal(windows, partition_loops(x, ws), what=f"window_partition(x {str(dtype)[6:]} {tuple(x.shape)}, {ws})",
                 hint="the windows are x's values, unchanged: " + ORDER, mistakes=mistakes.partition_mistakes(x, ws))
    back = call_reverse(impl, windows, ws, H, W)
    assert_equal(back, reverse_loops(windows, ws, H, W), what=f"window_reverse(window_partition(x {str(dtype)[6:]}), "
                 f"{ws}, {H}, {W})", hint="window_reverse keeps the windows' dtype and values",
                 mistakes=mistakes.reverse_mistakes(windows, ws, H, W))


def test_partition_does_not_modify_input(impl, gen):
    x = randn(2, 4, 6, 3, gen=gen)
    _, (after, _) = adapters.window_partition(impl).call_returning_args(x, 2)
    assert_equal(after, x, what="x after window_partition(x, 2)",
                 hint="window_partition only reads x: build the windows in a new tensor (or a view)")


@pytest.mark.parametrize("H, W, ws", [(5, 4, 2), (4, 5, 2), (7, 7, 3), (6, 10, 4), (3, 3, 4)],
                         ids=lambda v: str(v))
def test_partition_rejects_indivisible_maps(impl, gen, H, W, ws):
    x = randn(1, H, W, 2, gen=gen)
    message = expect_value_error(adapters.window_partition(impl), x, ws,
                                 what=f"window_partition(x (1, {H}, {W}, 2), {ws})",
                                 lets_through=mistakes.window_checks(H, W, ws))
    assert message, "the ValueError should say what is wrong (H and W must be multiples of window_size)"


# --- shifted_window_mask -------------------------------------------------------------------------------

# (H, W, ws, s), s > 0 (with s = 0 the mask is all True, which all-True code gets right): Swin's
# s = ws // 2 and other shifts, 2s < ws and 2s > ws, square and non-square maps, one row of windows,
# a single window. The first two cases tell the catalogued mistakes apart (on square maps, or with
# s = ws - 1, 2s = ws or s + 1 = ws // 2, some give the same mask, and no diagnosis is then given), so
# that a failure's message, its first failing case's, can name the mistake (`grader check` deals the
# cases of a lone component out to two processes: the first is one of these two).
MASK_CASES = [(12, 18, 6, 1), (21, 14, 7, 1), (8, 8, 4, 1), (4, 4, 2, 1), (8, 8, 4, 2), (8, 12, 4, 3),
              (12, 8, 4, 1), (6, 9, 3, 2), (14, 14, 7, 3), (14, 21, 7, 2), (7, 14, 7, 3), (5, 5, 5, 2)]


@pytest.mark.parametrize("H, W, ws, s", MASK_CASES, ids=lambda v: str(v))
def test_shifted_window_mask_matches_swin_labels(impl, H, W, ws, s):
    out = call_mask(impl, H, W, ws, s)
    assert_equal(out, swin_labels_mask(H, W, ws, s), what=Phrase("shifted_window_mask({H}, {W}, {ws}, {s}) against "
                                                                 "Swin's label map compared token by token", H=H,
                                                                 W=W, ws=ws, s=s), hint=MASK, mistakes=mask_mistakes(H, W, ws, s))


# The same map and window asked for again with other shifts, in one round trip: nothing that one call keeps (a
# mask cached under the map's size) may answer another.
AGAIN_SHIFTS = [3, 1, 2, 0]


def test_mask_asked_again_with_other_shifts(impl):
    H, W, ws = 8, 12, 4
    outs = adapters.shifted_window_mask(impl).map([(H, W, ws, s) for s in AGAIN_SHIFTS])
    for call, (s, out) in enumerate(zip(AGAIN_SHIFTS, outs), 1):
        what = Phrase("shifted_window_mask({H}, {W}, {ws}, {s}), call {call} of {len_AGAIN_SHIFTS} with this map "
                      "and window", H=H, W=W, ws=ws, s=s, call=call, len_AGAIN_SHIFTS=len(AGAIN_SHIFTS))
        check_tensor(out, what=what, shape=((H // ws) * (W // ws), ws * ws, ws * ws), dtype=torch.bool,
                     hint="a bool tensor (nW, ws * ws, ws * ws), True where two tokens may attend",
                     mistakes=mistakes.mask_dtype_mistakes(H, W, ws, s))
        assert_equal(out, swin_labels_mask(H, W, ws, s), what=what, hint=MASK,
                     mistakes=mistakes.mask_asked_again_mistakes(H, W, ws, s, AGAIN_SHIFTS[0]))


# (H, W, ws, s), cases of their own, s = 0 excluded (checked below).
ROLLED_CASES = [(18, 12, 6, 1), (14, 21, 7, 1), (12, 12, 6, 2), (6, 6, 2, 1), (9, 6, 3, 1), (12, 12, 6, 5),
                (8, 16, 8, 4), (10, 15, 5, 4)]


@pytest.mark.parametrize("H, W, ws, s", ROLLED_CASES, ids=lambda v: str(v))
def test_mask_matches_the_rolled_coordinates(impl, H, W, ws, s):
    out = call_mask(impl, H, W, ws, s)
    assert_equal(out, rolled_coordinates_mask(H, W, ws, s), what=Phrase("shifted_window_mask({H}, {W}, {ws}, {s}) "
                                                                        "against the pixels' coordinates before "
                                                                        "the roll", H=H, W=W, ws=ws, s=s), mistakes=mask_mistakes(H, W, ws, s),
                 hint="position (r, c) of the rolled map is pixel ((r + s) % H, (c + s) % W) of the image; two tokens "
                      "of a window may attend exactly when the roll did not tear them apart (their offset in the "
                      "image is their offset in the window)")


UNSHIFTED_CASES = [(4, 4, 2), (6, 9, 3), (14, 7, 7)]


def first_asked(H: int, W: int, ws: int, s: int) -> int:
    """The shift of the first mask that the checks above ask for with this map and window, in the order they run
    (a mask cached under (H, W, ws) is that one); `s` itself where none comes before."""
    asked = [*MASK_CASES, *ROLLED_CASES, *((h, w, k, 0) for h, w, k in UNSHIFTED_CASES)]
    return next(shift for h, w, k, shift in asked if (h, w, k) == (H, W, ws))


def mask_mistakes(H: int, W: int, ws: int, s: int):
    """The mask's known mistakes, and the mask of the first shift asked with this map and window (a cache)."""
    return mistakes.mask_asked_again_mistakes(H, W, ws, s, first_asked(H, W, ws, s))


@pytest.mark.parametrize("H, W, ws", UNSHIFTED_CASES, ids=lambda v: str(v))
def test_mask_without_shift_is_all_true(impl, H, W, ws):
    out = call_mask(impl, H, W, ws, 0)
    assert_equal(out, torch.ones_like(out), what=f"shifted_window_mask({H}, {W}, {ws}, 0)",
                 hint="with shift_size 0 nothing is rolled: every token of a window may attend to every other",
                 mistakes=mask_mistakes(H, W, ws, 0))


@pytest.mark.parametrize("H, W, ws, s", [(8, 8, 4, 2), (6, 9, 3, 1), (14, 14, 7, 3)], ids=lambda v: str(v))
def test_mask_is_symmetric_with_a_true_diagonal(impl, H, W, ws, s):
    out = call_mask(impl, H, W, ws, s)
    what = f"shifted_window_mask({H}, {W}, {ws}, {s})"
    assert_equal(out.diagonal(dim1=1, dim2=2), torch.ones(out.shape[:2], dtype=torch.bool),
                 what=Phrase("the diagonals of {what}", what=what), hint="every token may attend to itself: it has its own label")
    assert_equal(out.transpose(1, 2), out, what=Phrase('{what} transposed', what=what),
                 hint="'same label' is symmetric: mask[n, i, j] == mask[n, j, i]")


@pytest.mark.parametrize("H, W, ws, s", [(8, 8, 4, 2), (6, 4, 2, 1)], ids=lambda v: str(v))
def test_mask_device(impl, H, W, ws, s):
    mask = adapters.shifted_window_mask(impl)
    shape = ((H // ws) * (W // ws), ws * ws, ws * ws)
    hint = "create the mask (and the label map it comes from) directly on the requested device (pass device=)"
    # As masking's device check: first ask for the CPU while anything made without device= lands on the
    # meta device; only an answer this cannot settle pays for asking for the meta device itself.
    try:
        out = mask.with_default_device("meta", H, W, ws, s, device="cpu")
    except StudentTimeout:
        raise
    except StudentError:  # NotImplementedError too: torch raises it for copying data out of meta
        out = None
    if out is not None:
        check_tensor(out, what=Phrase("shifted_window_mask({H}, {W}, {ws}, {s}, device='cpu') while the default "
                                      "device is meta", H=H, W=W, ws=ws, s=s), shape=shape, dtype=torch.bool, device="cpu", hint=hint,
                     mistakes=mistakes.mask_dtype_mistakes(H, W, ws, s))
        return
    out = mask(H, W, ws, s, device="meta")
    check_tensor(out, what=f"shifted_window_mask({H}, {W}, {ws}, {s}, device='meta')", shape=shape, dtype=torch.bool,
                 device="meta", hint=hint)


@pytest.mark.parametrize("ws, s", [(4, 4), (4, 5), (4, -1), (2, -2), (7, 7)], ids=lambda v: str(v))
def test_mask_rejects_shifts_outside_the_window(impl, ws, s):
    H = W = 2 * ws
    message = expect_value_error(adapters.shifted_window_mask(impl), H, W, ws, s,
                                 what=f"shifted_window_mask({H}, {W}, {ws}, {s})",
                                 lets_through=mistakes.shift_checks(ws, s))
    assert message, "the ValueError should say what is wrong (shift_size must lie in 0 .. window_size - 1)"


@pytest.mark.parametrize("H, W, ws, s", [(6, 8, 4, 2), (8, 6, 4, 2), (9, 9, 2, 1), (3, 3, 4, 1)],
                         ids=lambda v: str(v))
def test_mask_rejects_indivisible_maps(impl, H, W, ws, s):
    message = expect_value_error(adapters.shifted_window_mask(impl), H, W, ws, s,
                                 what=f"shifted_window_mask({H}, {W}, {ws}, {s})",
                                 lets_through=mistakes.window_checks(H, W, ws))
    assert message, "the ValueError should say what is wrong (H and W must be multiples of window_size)"
