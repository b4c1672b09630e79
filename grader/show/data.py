"""What each figure shows, as arrays: the expected panels beside the learner's (drawing is draw.py's).

Each figure is one function that makes its panels from the functions it is
given: once from the grader's trusted stand-ins (grader/sandbox/standins/)
or a PyTorch built-in (the checks' own helpers in tests/checklib), in this
process, and once from the learner's code, reached only through
tests/checklib/adapters.py on a `Target` whose worker is confined as in a
grading (grader/engine/remote.py). Student code never runs in this process.
Inputs are fixed (seeded), so a figure is the same on every run.

The words are English source text (marked `N_`, with `fields` to fill in), as
are the expected panels a release stores; they are translated where they are
shown (`Panel.title_text`, `Figure.caption_text`, ..., draw.py), so that the
drawing can keep to English where no font has CJK glyphs (draw.py).
"""
from __future__ import annotations

import functools
import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from ..check_text import render
from ..figures import FIGURES
from .. import i18n
from ..i18n import N_, _
from ..checks_library import checklib
from ..sandbox import standins
from ..sandbox.protocol import NotStarted, StudentError

MASK, HEAT, CLASSES, SIGNED = "mask", "heat", "classes", "signed"  # how a panel's values are coloured


@dataclass
class Panel:
    """One 2-D array drawn as a grid of cells; `labels` (same shape) are written in the cells."""

    title: str  # English, with {fields}; title_text() is what a learner reads
    values: np.ndarray  # (rows, columns): bool for MASK, ints for CLASSES (-1: nothing there), floats otherwise
    kind: str = HEAT
    labels: np.ndarray | None = None
    xlabel: str = ""
    ylabel: str = ""
    scale: tuple[float, float] | None = None  # the colour scale's ends (default: the expected panel's range)
    fields: dict[str, Any] = field(default_factory=dict)  # what the title's {placeholders} stand for

    def title_text(self, gettext: Callable[[str], str] = _) -> str:
        """The title in the language of `gettext` (default: the language in use)."""
        return gettext(self.title).format(**self.fields) if self.fields else gettext(self.title)

    def same_as(self, other: "Panel") -> bool:
        """Equal values (close, for floats) and, where the values are whole, equal labels (the numbers in cells)."""
        if self.values.shape != other.values.shape:
            return False
        if self.values.dtype.kind in "biu":
            return bool(np.array_equal(self.values, other.values)) and _same_labels(self.labels, other.labels)
        return bool(np.allclose(self.values, other.values, atol=1e-4, rtol=1e-4, equal_nan=True))


def _same_labels(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    return (a is None) == (b is None) and (a is None or (a.shape == b.shape and bool((a == b).all())))


@dataclass
class Figure:
    """A figure's data: the expected panels, the learner's (None, with `why`, when their code failed)."""

    component: str
    name: str
    caption: str  # English (grader/figures.py); caption_text() is what a learner reads
    expected: list[Panel]
    yours: list[Panel] | None = None
    why: str = ""  # why there are no panels of the learner's, in English
    why_shown: str = ""  # the same in the language in use when the figure was made
    notes: list[str] = field(default_factory=list)  # English source texts

    def caption_text(self, gettext: Callable[[str], str] = _) -> str:
        """The caption in the language of `gettext` (default: the language in use)."""
        return gettext(self.caption)

    def why_text(self, english: bool = False) -> str:
        """Why the learner's panels are missing, in the language in use (or in English)."""
        return self.why if english else self.why_shown or self.why

    @property
    def matches(self) -> bool | None:
        """Whether the learner's panels equal the expected ones (None without one side or the other)."""
        if self.yours is None or not self.expected:
            return None
        return len(self.yours) == len(self.expected) and all(a.same_as(b) for a, b in zip(self.yours, self.expected))


class Unreadable(Exception):
    """The learner's code returned something the figure cannot be drawn from: `problem` (English, with {fields})
    says what."""

    def __init__(self, problem: str, **fields: Any) -> None:
        self.problem, self.fields = problem, fields
        super().__init__(problem.format(**fields))

    def text(self) -> str:
        """The problem in the language in use."""
        return _(self.problem).format(**self.fields)


def _checklib():
    """tests/checklib, as the checks import it (through grader/checks_library.py, the one seam)."""
    return checklib("adapters", "weights")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _array(value: Any, what: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
    """`value` (a tensor) as a numpy array, of `shape` where given."""
    if not isinstance(value, Tensor):
        raise Unreadable(N_("{call} returned {type}, not a tensor"), call=what, type=type(value).__name__)
    if shape is not None and tuple(value.shape) != shape:
        raise Unreadable(N_("{call} returned shape {got}, expected {expected}"), call=what, got=tuple(value.shape),
                         expected=shape)
    value = value.detach()
    if value.is_complex() or value.device.type != "cpu":
        raise Unreadable(N_("{call} returned a {dtype} tensor on {device}"), call=what, dtype=value.dtype,
                         device=value.device)
    return value.numpy() if value.dtype == torch.bool else value.to(torch.float64).numpy()


# --------------------------------------------------------------------------- masking

def masking(causal_mask: Callable, apply_mask: Callable) -> list[Panel]:
    """causal_mask(5), causal_mask(3, 6) and softmax(apply_mask(scores, the right mask)) over (3, 6)."""
    square = _array(causal_mask(5), "causal_mask(5)", (5, 5)).astype(bool)
    offset = _array(causal_mask(3, 6), "causal_mask(3, 6)", (3, 6)).astype(bool)
    scores = torch.randn(3, 6, generator=_gen(14))
    scores[0] -= 1e5  # a masked score must lie below any score: -1e4 or 0 would win here
    right = torch.ones(3, 6, dtype=torch.bool).tril(3)
    masked = _array(apply_mask(scores, right), "apply_mask(scores (3, 6), mask)", (3, 6))
    weights = torch.softmax(torch.from_numpy(masked), -1).numpy()
    return [Panel("causal_mask(5)", square, MASK, xlabel=N_("key j"), ylabel=N_("query i")),
            Panel("causal_mask(3, k_len=6)", offset, MASK, xlabel=N_("key j"), ylabel=N_("query i (the last 3 of 6)")),
            Panel("softmax(apply_mask(scores, mask))", weights, HEAT, _numbers(weights), N_("key j"), N_("query i"),
                  (0.0, 1.0))]


def _numbers(values: np.ndarray, digits: int = 2) -> np.ndarray:
    """Each value written short (0.25, 1, -90); nothing for -inf or nan."""
    def short(v: float) -> str:
        text = f"{v:.{digits}f}"
        text = text.rstrip("0").rstrip(".") if "." in text else text
        return "0" if text == "-0" else text
    return np.vectorize(lambda v: short(v) if np.isfinite(v) else "", otypes=[str])(values)


# --------------------------------------------------------------------------- head_splitting

HEAD_D, HEAD_T, HEAD_H = 8, 3, 2


def head_split(split_heads: Callable, merge_heads: Callable) -> list[Panel]:
    """x[0, t, f] = 100 t + f, split into 2 heads: each head's (T, Dh) block; then merged back."""
    t = torch.arange(HEAD_T, dtype=torch.float32)[:, None]
    f = torch.arange(HEAD_D, dtype=torch.float32)[None, :]
    x = (100 * t + f)[None]  # (1, T, D)
    dh = HEAD_D // HEAD_H
    heads = _array(split_heads(x, HEAD_H), f"split_heads(x {tuple(x.shape)}, {HEAD_H})", (1, HEAD_H, HEAD_T, dh))[0]
    h, t, d = (torch.arange(n, dtype=torch.float32).view(shape) for n, shape in
               ((HEAD_H, (-1, 1, 1)), (HEAD_T, (1, -1, 1)), (dh, (1, 1, -1))))
    split = (100 * t + h * dh + d)[None]  # (1, H, T, Dh): head h holds features h*Dh .. (h+1)*Dh - 1
    merged = _array(merge_heads(split), f"merge_heads(heads {tuple(split.shape)})", (1, HEAD_T, HEAD_D))[0]
    panels = [_feature_panel(N_("head {h}"), heads[h], N_("feature of the head"), h=h) for h in range(HEAD_H)]
    return panels + [_feature_panel(N_("merge_heads (all heads)"), merged, N_("feature"))]


def _feature_panel(title: str, values: np.ndarray, xlabel: str, **fields: Any) -> Panel:
    """Cells holding 100 t + f: coloured by the position t, numbered by the feature f ("?": neither)."""
    whole = np.rint(values).astype(int)
    exact = np.isclose(values, whole) & (whole >= 0) & (whole % 100 < HEAD_D) & (whole // 100 < HEAD_T)
    position = np.where(exact, whole // 100, -1)
    labels = np.where(exact, (whole % 100).astype(str), "?")
    return Panel(title, position, CLASSES, labels, xlabel, N_("position t (colour)"), fields=fields)


# --------------------------------------------------------------------------- multi_head_attention

ATT_D, ATT_H, ATT_T = 16, 4, 6


def _heads(weights: np.ndarray) -> list[Panel]:
    return [Panel(N_("head {h}"), weights[h], HEAT, _numbers(weights[h], 1), N_("key"), N_("query"), (0.0, 1.0),
                  fields={"h": h}) for h in range(weights.shape[0])]


def attention_heads(new_attention: Callable) -> list[Panel]:
    """MultiHeadAttention(16, 4) with fixed weights on one sequence of 6, no mask: last_attention per head, and
    the output (positions down, features across)."""
    lib = _checklib()
    gen = _gen(141)
    x = lib.weights.randn(1, ATT_T, ATT_D, gen=gen, scale=2.0)
    out, weights = new_attention(lib.weights.mha_state(ATT_D, gen=gen))(x)
    weights = _array(weights, "last_attention after MultiHeadAttention(16, 4)(x)", (1, ATT_H, ATT_T, ATT_T))[0]
    out = _array(out, "MultiHeadAttention(16, 4)(x)", (1, ATT_T, ATT_D))[0]
    return _heads(weights) + [Panel(N_("the output"), out, SIGNED, xlabel=N_("feature"), ylabel=N_("position"))]


class _LastAttention:
    """The learner's module as `attention_heads` asks for it: weights in, (output, last_attention) out."""

    def __init__(self, impl) -> None:
        self.impl = impl

    def __call__(self, state: dict[str, Tensor]) -> Callable:
        module = _checklib().adapters.MultiHeadAttention(self.impl, ATT_D, ATT_H)
        module.load_weights(state)
        module.eval()

        def run(x: Tensor) -> tuple[Any, Any]:
            out = module(x)
            return out, module.attr("last_attention")
        return run


def _expected_attention(state: dict[str, Tensor]) -> Callable:
    mha = _checklib().weights.torch_mha(state, ATT_D, ATT_H)

    def run(x: Tensor) -> tuple[Tensor, Tensor]:
        with torch.no_grad():
            return mha(x, x, x, need_weights=True, average_attn_weights=False)
    return run


def sdpa_weights(sdpa: Callable) -> list[Panel]:
    """scaled_dot_product_attention on fixed q, k, v (1, 4, 6, 4) with a causal mask: the weights per head, and
    head 0's output."""
    gen = _gen(142)
    q, k, v = (torch.randn(1, ATT_H, ATT_T, 4, generator=gen) * 1.5 for _ in range(3))
    mask = torch.ones(ATT_T, ATT_T, dtype=torch.bool).tril()
    result = sdpa(q, k, v, mask)
    if not isinstance(result, tuple) or len(result) != 2:
        raise Unreadable(N_("{call} returned {type}, not (out, weights)"), call="scaled_dot_product_attention",
                         type=type(result).__name__)
    weights = _array(result[1], "scaled_dot_product_attention(q, k, v, mask)[1]", (1, ATT_H, ATT_T, ATT_T))[0]
    out = _array(result[0], "scaled_dot_product_attention(q, k, v, mask)[0]", (1, ATT_H, ATT_T, 4))[0, 0]
    return _heads(weights) + [Panel(N_("head 0's output"), out, SIGNED, _numbers(out, 1), N_("feature"), N_("query"))]


def _expected_sdpa(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> tuple[Tensor, Tensor]:
    eye = torch.eye(k.shape[-2]).expand(*k.shape[:-1], k.shape[-2])  # v = I: the output is the weights
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), F.scaled_dot_product_attention(q, k, eye, attn_mask=mask)


# --------------------------------------------------------------------------- sinusoidal_encoding

PE_LEN, PE_D = 48, 32


def sinusoidal(encoding: Callable) -> list[Panel]:
    """sinusoidal_positional_encoding(48, 32) as a heatmap."""
    table = _array(encoding(PE_LEN, PE_D), f"sinusoidal_positional_encoding({PE_LEN}, {PE_D})", (PE_LEN, PE_D))
    return [Panel(f"sinusoidal_positional_encoding({PE_LEN}, {PE_D})", table, SIGNED,
                  xlabel=N_("feature (even: sin, odd: cos)"), ylabel=N_("position"))]


# --------------------------------------------------------------------------- patch_embedding

IMG, PATCH, CHANNELS = 6, 2, 2


def patch_order(patchify: Callable) -> list[Panel]:
    """patchify of a 2-channel 6x6 image whose pixels hold 100 * channel + their index: per channel, each pixel's
    patch (colour) and slot in the patch vector (number)."""
    image = (torch.arange(IMG * IMG, dtype=torch.float32).view(1, 1, IMG, IMG)
             + 100 * torch.arange(CHANNELS, dtype=torch.float32).view(1, CHANNELS, 1, 1))
    n, size = (IMG // PATCH) ** 2, CHANNELS * PATCH * PATCH
    out = _array(patchify(image, PATCH), f"patchify(image (1, {CHANNELS}, {IMG}, {IMG}), {PATCH})", (1, n, size))[0]
    patch, slot = np.full((CHANNELS, IMG * IMG), -1), np.full((CHANNELS, IMG * IMG), -1)
    for p in range(n):
        for s in range(size):
            value = round(out[p, s])
            channel, pixel = divmod(value, 100)
            if np.isclose(out[p, s], value) and 0 <= channel < CHANNELS and pixel < IMG * IMG:
                patch[channel, pixel], slot[channel, pixel] = p, s
    return [Panel(N_("channel {c}: patch (colour), slot (number)"), patch[c].reshape(IMG, IMG), CLASSES,
                  np.where(slot[c] >= 0, slot[c].astype(str), "?").reshape(IMG, IMG), "x", "y", fields={"c": c})
            for c in range(CHANNELS)]


def _expected_patchify(images: Tensor, patch_size: int) -> Tensor:
    return F.unfold(images, patch_size, stride=patch_size).transpose(1, 2)


# --------------------------------------------------------------------------- kv_cache

KV_STEPS = (3, 1, 1, 1)  # a prefill of 3 positions, then one token per step


def kv_cache_growth(new_cache: Callable) -> list[Panel]:
    """KVCache.update with chunks of 3, 1, 1, 1 positions whose keys hold their position: the keys that come back
    at each step, and len(cache) before and after each."""
    cache = new_cache()
    total = sum(KV_STEPS)
    held = np.full((len(KV_STEPS), total), -1)
    lengths, start = [len(cache)], 0
    for step, size in enumerate(KV_STEPS):
        k = torch.arange(start, start + size, dtype=torch.float32).view(1, 1, size, 1).expand(1, 2, size, 2)
        result = cache.update(k.contiguous(), (-k).contiguous())
        if not isinstance(result, tuple) or len(result) != 2:
            raise Unreadable(N_("{call} returned {type}, not (k_all, v_all)"), call="cache.update(k, v)",
                             type=type(result).__name__)
        keys = _array(result[0], f"cache.update(k, v) #{step + 1}")
        if keys.ndim != 4 or keys.shape[-2] > total:
            raise Unreadable(N_("{call} at step {step} returned keys of shape {shape}"), call="cache.update(k, v)",
                             step=step + 1, shape=keys.shape)
        held[step, :keys.shape[-2]] = np.rint(keys[0, 0, :, 0]).astype(int)
        lengths.append(len(cache))
        start += size
    sizes = np.array([lengths])
    return [Panel(N_("positions in the keys update returns"), held, CLASSES,
                  np.where(held >= 0, held.astype(str), ""), N_("slot in the returned keys"), N_("decode step")),
            Panel(N_("len(cache): new, then after each step"), sizes, HEAT, sizes.astype(str), N_("step"), "",
                  (0.0, float(total)))]


# --------------------------------------------------------------------------- rope

ROPE_T, ROPE_D, ROPE_BASE = 16, 8, 100.0  # a base other than the default: a table must use it


def rope_rotation(rope_angles: Callable, apply_rope: Callable) -> list[Panel]:
    """apply_rope on x whose every pair is (1, 0), with rope_angles(16, 8, base=100): each pair's angle, in degrees,
    and its length."""
    cos, sin = rope_angles(ROPE_T, ROPE_D, ROPE_BASE)
    x = torch.zeros(1, 1, ROPE_T, ROPE_D)
    x[..., 0::2] = 1.0
    out = _array(apply_rope(x, cos, sin), f"apply_rope(x (1, 1, {ROPE_T}, {ROPE_D}), *rope_angles({ROPE_T}, {ROPE_D}, base={ROPE_BASE:g}))",
                 (1, 1, ROPE_T, ROPE_D))[0, 0]
    angle = np.degrees(np.arctan2(out[:, 1::2], out[:, 0::2]))
    radius = np.hypot(out[:, 1::2], out[:, 0::2])
    return [Panel(N_("angle of pair i at position p (degrees)"), angle, SIGNED, _numbers(angle, 0), N_("pair i"),
                  N_("position p")),
            Panel(N_("length of each pair (1: a rotation)"), radius, HEAT, _numbers(radius, 1), N_("pair i"),
                  N_("position p"), (0.0, 2.0))]


# --------------------------------------------------------------------------- grouped_query_attention

GQA_KV, GQA_REP = 2, 3


def gqa_heads(repeat_kv: Callable) -> list[Panel]:
    """repeat_kv on 2 key/value heads whose values are their index, n_rep=3: query head -> key/value head."""
    x = torch.arange(GQA_KV, dtype=torch.float32).view(1, GQA_KV, 1, 1)
    out = _array(repeat_kv(x, GQA_REP), f"repeat_kv(x (1, {GQA_KV}, 1, 1), {GQA_REP})", (1, GQA_KV * GQA_REP, 1, 1))
    reads = np.rint(out[0, :, 0, 0]).astype(int)
    grid = reads[:, None] == np.arange(GQA_KV)[None, :]
    return [Panel(N_("query head (of {queries}) reads key/value head (of {kv})"), grid, MASK,
                  xlabel=N_("key/value head"), ylabel=N_("query head"), fields={"queries": GQA_KV * GQA_REP, "kv": GQA_KV})]


def _expected_repeat_kv(x: Tensor, n_rep: int) -> Tensor:
    return torch.repeat_interleave(x, n_rep, dim=1)


# --------------------------------------------------------------------------- swin_windows

SWIN, WS, SHIFT = 8, 4, 2


def swin_windows(window_partition: Callable) -> list[Panel]:
    """window_partition of an 8x8 map whose cells hold their index, windows of 4: each cell's window and slot."""
    grid = torch.arange(SWIN * SWIN, dtype=torch.float32).view(1, SWIN, SWIN, 1)
    n = (SWIN // WS) ** 2
    out = _array(window_partition(grid, WS), f"window_partition(x (1, {SWIN}, {SWIN}, 1), {WS})", (n, WS * WS, 1))
    window, slot = np.full(SWIN * SWIN, -1), np.full(SWIN * SWIN, -1)
    for w in range(n):
        for s in range(WS * WS):
            value = out[w, s, 0]
            if np.isclose(value, round(value)) and 0 <= round(value) < SWIN * SWIN:
                window[round(value)], slot[round(value)] = w, s
    window, slot = window.reshape(SWIN, SWIN), slot.reshape(SWIN, SWIN)
    return [Panel(N_("window (colour) and slot (number) of each cell"), window, CLASSES,
                  np.where(slot >= 0, slot.astype(str), "?"), N_("column"), N_("row"))]


def swin_mask(shifted_window_mask: Callable) -> list[Panel]:
    """shifted_window_mask(8, 8, 4, 2): one (16, 16) panel per window."""
    n = (SWIN // WS) ** 2
    mask = _array(shifted_window_mask(SWIN, SWIN, WS, SHIFT), f"shifted_window_mask({SWIN}, {SWIN}, {WS}, {SHIFT})",
                  (n, WS * WS, WS * WS)).astype(bool)
    return [Panel(N_("window {w}"), mask[w], MASK, xlabel=N_("key token"), ylabel=N_("query token"), fields={"w": w})
            for w in range(n)]


# --------------------------------------------------------------------------- the catalogue

class NoReference(Exception):
    """The expected panels need a stand-in that this copy of the grader lacks (a student release)."""


def _standin(name: str) -> Callable:
    """The trusted stand-in of the contract name `name` (grader/sandbox/standins/), in this process."""
    piece = standins.PIECES[name]
    if not standins.shipped(piece):
        raise NoReference(name)
    return getattr(importlib.import_module(f"{standins.__name__}.{piece}"), name)


# figure name -> (how to draw it from some functions, those functions as the grader trusts them (the
#                 stand-ins, or a PyTorch built-in), those functions as the learner wrote them, given a Target)
Maker = Callable[..., list[Panel]]
BUILDERS: dict[str, tuple[Maker, Callable[[], tuple], Callable[[Any], tuple]]] = {
    "causal_mask": (masking, lambda: (_standin("causal_mask"), _standin("apply_mask")),
                    lambda impl: (_checklib().adapters.causal_mask(impl), _checklib().adapters.apply_mask(impl))),
    "head_split": (head_split, lambda: (_standin("split_heads"), _standin("merge_heads")),
                   lambda impl: (_checklib().adapters.split_heads(impl), _checklib().adapters.merge_heads(impl))),
    "attention_heads": (attention_heads, lambda: (_expected_attention,), lambda impl: (_LastAttention(impl),)),
    "sdpa_weights": (sdpa_weights, lambda: (_expected_sdpa,),
                     lambda impl: (_checklib().adapters.scaled_dot_product_attention(impl),)),
    "sinusoidal_encoding": (sinusoidal, lambda: (_standin("sinusoidal_positional_encoding"),),
                            lambda impl: (_checklib().adapters.sinusoidal_positional_encoding(impl),)),
    "patch_order": (patch_order, lambda: (_expected_patchify,), lambda impl: (_checklib().adapters.patchify(impl),)),
    "kv_cache_growth": (kv_cache_growth, lambda: (_standin("KVCache"),),
                        lambda impl: (lambda: _checklib().adapters.KVCache(impl),)),
    "rope_rotation": (rope_rotation, lambda: (_standin("rope_angles"), _standin("apply_rope")),
                      lambda impl: (_checklib().adapters.rope_angles(impl), _checklib().adapters.apply_rope(impl))),
    "gqa_heads": (gqa_heads, lambda: (_expected_repeat_kv,), lambda impl: (_checklib().adapters.repeat_kv(impl),)),
    "swin_windows": (swin_windows, lambda: (_standin("window_partition"),),
                     lambda impl: (_checklib().adapters.window_partition(impl),)),
    "swin_mask": (swin_mask, lambda: (_standin("shifted_window_mask"),),
                  lambda impl: (_checklib().adapters.shifted_window_mask(impl),)),
}

# A student release has no stand-ins (they are answers): `release` stores the expected panels here instead
# (`save_expected`), pictures of fixed inputs, no code.
STORED = Path(__file__).with_name("expected.npz")


def expected_panels(name: str) -> list[Panel]:
    """The expected panels of figure `name`: from the stand-ins, else as a release stored them."""
    make, reference, _learner = BUILDERS[name]
    try:
        return make(*reference())
    except NoReference:
        stored = _stored().get(name)
        if stored is None:
            raise
        return stored


def expected_figure(component: str, name: str) -> Figure:
    """The figure with its expected panels only (none, with a note, where this grader cannot make them)."""
    try:
        return Figure(component, name, FIGURES[component][name].caption, expected_panels(name))
    except NoReference:
        return Figure(component, name, FIGURES[component][name].caption, [],
                      notes=[N_("no expected panels: this copy of the grader has neither the stand-ins nor stored ones")])


_META = ("title", "kind", "xlabel", "ylabel", "scale", "fields")


def save_expected(path: Path) -> None:
    """Store every figure's expected panels (arrays and their titles, no code) for a copy without stand-ins."""
    arrays: dict[str, np.ndarray] = {}
    for name in BUILDERS:
        for i, panel in enumerate(expected_panels(name)):
            arrays[f"{name}/{i}/values"] = panel.values
            if panel.labels is not None:
                arrays[f"{name}/{i}/labels"] = panel.labels.astype(str)
            arrays[f"{name}/{i}/meta"] = np.array(json.dumps({key: getattr(panel, key) for key in _META}))
    with open(path, "wb") as out:
        np.savez_compressed(out, **arrays)


@functools.cache
def _stored() -> dict[str, list[Panel]]:
    if not STORED.is_file():
        return {}
    panels: dict[str, dict[int, Panel]] = {}
    with np.load(STORED, allow_pickle=False) as data:
        for key in data.files:
            name, index, part = key.split("/")
            if part == "meta":
                meta = json.loads(str(data[key]))
                labels = data.get(f"{name}/{index}/labels")
                panels.setdefault(name, {})[int(index)] = Panel(
                    meta["title"], data[f"{name}/{index}/values"], meta["kind"], labels, meta["xlabel"],
                    meta["ylabel"], tuple(meta["scale"]) if meta["scale"] else None, meta.get("fields", {}))
    return {name: [by_index[i] for i in sorted(by_index)] for name, by_index in panels.items()}


CANNOT = N_("cannot draw yours: {problem}")


def figure(component: str, name: str, impl) -> Figure:
    """The figure, with the learner's panels made from `impl` (a Target) where their code lets it."""
    result = expected_figure(component, name)
    make, _trusted, learner = BUILDERS[name]
    try:
        result.yours = make(*learner(impl))
    except NotStarted as exc:  # the stub's words are English code: another language names the error only
        result.why = str(exc)
        result.why_shown = result.why if i18n.language() == i18n.DEFAULT else _(
            "not started: your code raises NotImplementedError")
    except StudentError as exc:  # raised, hung, crashed, failed to load: as a check would say it
        result.why, result.why_shown = str(exc), render(exc.args[0] if exc.args else str(exc))
    except Unreadable as exc:
        result.why, result.why_shown = CANNOT.format(problem=exc), _(CANNOT).format(problem=exc.text())
    except Exception as exc:  # noqa: BLE001 - what came back does not fit the drawing: say so, draw the rest
        problem = f"{type(exc).__name__}: {exc}"
        result.why, result.why_shown = CANNOT.format(problem=problem), _(CANNOT).format(problem=problem)
    if result.matches is False:
        result.notes.append(N_("yours differs from the expected"))
    return result


def component_figures(component: str, impl, names: list[str] | None = None) -> list[Figure]:
    """The figures of `component` (grader/figures.py; all, or those `names` lists), the learner's panels from
    `impl`."""
    return [figure(component, name, impl) for name in FIGURES[component] if names is None or name in names]

