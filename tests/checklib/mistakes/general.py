"""The known mistakes that are no one component's, and the recognisers and combinators every component's
bundles use (`besides`, `mapped`, `fitted_besides`, ...).

It sits below `compare.py` (which weighs `dtype_changed` and `squeezed` on every comparison) and
imports nothing of it: a mistake's output is matched as the checks match it by `tolerance.py`.
"""
from __future__ import annotations

import itertools
import re
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import GENERAL, Known, Mistake, Mistakes, mistake, recognised
from ..tolerance import matches


# torch's words when two tensors' sizes do not broadcast (the mistakes below that students' errors reveal)
MISMATCHED_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def mismatched_sizes(message: str) -> set[int] | None:
    """The two sizes an error says did not broadcast, or None where it says no such thing."""
    sizes = MISMATCHED_SIZES.search(message)
    return None if sizes is None else {int(sizes[1]), int(sizes[2])}


def mapped(mistakes: Mistakes, fn: Callable[[Any], Any]) -> Mistakes:
    """The same mistakes seen through `fn` (e.g. a slice, or a row sum), still lazy."""
    return {known: (lambda m=model: fn(m() if callable(m) else m)) for known, model in mistakes.items()}


def besides(named: Mistakes, family: Mistakes, got: Any = None, *, prefer_named: bool = True) -> Mistakes:
    """`named` and a fitted `family`. Where a member gives what a named mistake gives, and that is what came
    back (`got`; unknown: assumed), the member says nothing (None): the named sentence is the one that
    teaches there (or, `prefer_named=False`, neither says anything: a diagnosis is never a guess); where it
    is not what came back, both are weighed as usual. Still lazy: the outputs are computed once, when the
    first is weighed."""
    outputs: dict[str, Any] = {}

    def computed(models: Mistakes) -> dict[str, Any]:
        for known, model in models.items():
            if known not in outputs:
                try:
                    outputs[known] = model() if callable(model) else model
                except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
                    outputs[known] = None
        return {s: outputs[s] for s in models}

    def shared(mine: Any, others: Mistakes) -> bool:
        """Whether `mine` and another model would both match what came back (as the check weighs them)."""
        if got is None:
            return any(same_output(mine, o) for o in computed(others).values())
        return matches(got, mine, None, None) and any(matches(got, o, None, None)
                                                       for o in computed(others).values())

    def member(known: Known) -> Any:
        mine = computed({known: family[known]})[known]
        return None if shared(mine, named) else mine

    def named_one(known: Known) -> Any:
        mine = computed({known: named[known]})[known]
        return None if shared(mine, family) else mine

    if prefer_named:
        return {**named, **{s: (lambda s=s: member(s)) for s in family}}
    return {**{s: (lambda s=s: named_one(s)) for s in named}, **{s: (lambda s=s: member(s)) for s in family}}


def one_bad_side(height: int, width: int, size: int, entry: Mistake) -> dict[Mistake, bool]:
    """For a check that must reject a (height, width) map not divisible by `size`: `entry` (a check that lets
    one bad side through) lets this one through where exactly one side is bad."""
    return {entry: bool(height % size) != bool(width % size)}


def plus(term: str, offset: int) -> str:
    """`term` with an offset written after it, as a sentence shows it ("t + 1", "t - 2", or `term` alone)."""
    return term + (f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else "")


def same_output(a: Any, b: Any) -> bool:
    """Whether two models' outputs are the same tensor (within 1e-4, infinities equal): where two mistakes give
    the same, neither is told apart by these inputs."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.shape != b.shape:
        return False
    a, b = a.double(), b.double()
    return bool(((a == b) | (a.isfinite() & b.isfinite() & ((a - b).abs() <= 1e-4 * (1 + b.abs())))).all())


def judged_whole(mistakes: Mistakes, got: Any, fn: Callable[[Any], Any]) -> Mistakes:
    """For a check of `fn(got)` (a part of what came back): a mistake is named only where the whole of `got`
    matches its output, not where the part happens to; one whose part differs from `got`'s is weighed (and
    so ruled out) on its part."""
    def part(model: Any) -> Any:
        whole = model() if callable(model) else model
        if same_output(got, whole):
            return fn(got)
        if whole is None:
            return None
        mine = fn(whole)
        return None if same_output(mine, fn(got)) else mine
    return {s: (lambda m=m: part(m)) for s, m in mistakes.items()}


def unambiguous(mistakes: Mistakes) -> Mistakes:
    """The mistakes whose output no other mistake of the mapping shares on these inputs (the others give None):
    where two mistakes look the same, naming either could be wrong. Still lazy: every output is computed
    once, when the first is weighed (a check that passes weighs none)."""
    values: dict[str, Any] = {}

    def computed() -> dict[str, Any]:
        if not values:
            for known, model in mistakes.items():
                try:
                    values[known] = model() if callable(model) else model
                except Exception:  # noqa: BLE001 - a mistake that does not apply to these inputs
                    values[known] = None
        return values

    def model_of(known: Known) -> Any:
        mine = computed()[known]
        return None if any(o != known and same_output(mine, w) for o, w in values.items()) else mine

    return {known: (lambda s=known: model_of(s)) for known in mistakes}


# (GENERAL entries: a dtype the result does not keep, torch's own words for a mistake in student code.)

# The result's dtype is not the one the check asks for, its shape being right (compare.diagnose weighs these:
# matched where only the dtype is wrong, ruled out where the values are wrong in the right dtype).
FLOAT_DTYPE_CHANGED = recognised(
    GENERAL, "float_dtype_changed",
    "your result changed dtype on the way: a .float() or .double(), a dtype= argument, or a tensor made "
    "without dtype= (float32 by default) mixed in; compute in the dtype the result must have (the inputs', "
    "x.dtype, where it follows them), or cast back with .to(...)")
NOT_BOOL = recognised(
    GENERAL, "not_bool",
    "your mask is not a bool tensor: make it with dtype=torch.bool, or by a comparison (j <= i); masked_fill "
    "and ~ want bool, and 0/1 numbers (uint8, int, float) are no mask")
NOT_INTEGER = recognised(
    GENERAL, "not_integer",
    "your indices are not integers: keep integer arithmetic (arange without a float dtype, // rather than /), "
    "or convert with .long()")


def dtype_changed(want: torch.dtype, got: torch.dtype | None = None) -> Mistake | None:
    """The entry for a result that should be of dtype `want` and came back in `got` (None: any other dtype
    that entry is about), or None where no entry is about these two."""
    if want == torch.bool:
        return NOT_BOOL
    if want.is_floating_point:
        return FLOAT_DTYPE_CHANGED if got is None or got.is_floating_point else None
    if not want.is_complex:
        return NOT_INTEGER if got is None or got.is_floating_point or got == torch.bool else None
    return None


SQUEEZED = recognised(
    GENERAL, "squeezed",
    "your result lost its axes of size 1 (its shape is the expected one without them): squeeze() without a dim "
    "drops every axis of size 1 (the batch's too when the batch is one), and so does a sum or mean over such an "
    "axis; squeeze only the dim you mean (squeeze(-1)), or keep it (keepdim=True)")


def squeezed(actual: Any, shape: Any) -> tuple[Mistake, bool] | None:
    """SQUEEZED, and whether a tensor `actual` of a wrong shape is the expected `shape` less its axes of size 1;
    None where it cannot tell (no tensor, no shape known, no axis of size 1 in it, the shape right)."""
    if not isinstance(actual, Tensor) or shape is None or None in tuple(shape) or 1 not in tuple(shape) or \
            tuple(actual.shape) == tuple(shape):
        return None
    return SQUEEZED, tuple(actual.shape) == tuple(d for d in shape if d != 1)


# torch's own error messages that name a mistake in the line of student code that raised them.
VIEW_NOT_CONTIGUOUS = recognised(
    GENERAL, "view_not_contiguous",
    "you called .view on a tensor whose memory is not in row order (it was transposed or permuted), and view "
    "cannot regroup it: use .reshape(...), or .contiguous().view(...)")
TENSOR_AS_BOOL = recognised(
    GENERAL, "tensor_as_bool",
    "you used a tensor as a truth value (if t, not t, t or u, and): a tensor of several values has none. Test "
    "`t is None` where you mean 'not set yet' (an empty cache), or reduce it with .any() / .all()")
BMM_NOT_3D = recognised(
    GENERAL, "bmm_not_3d",
    "you called torch.bmm, which takes 3-D tensors only, (batch, n, m): use @ (torch.matmul), which batches over "
    "every leading dimension")
RETURN_TYPES_PAIR = recognised(
    GENERAL, "return_types_pair",
    "you used what x.max(dim) (or min, sort, topk, median) returns as a tensor: with a dim it returns a pair "
    "(values, indices); take .values (or [0]), or use x.amax(dim, keepdim=True) / x.amin(...)")
EINSUM_FIXED_RANK = recognised(
    GENERAL, "einsum_fixed_rank",
    "your torch.einsum equation spells out a fixed number of dimensions (such as 'bhid,bhjd->bhij'), and a tensor "
    "came with another number: write the leading dimensions as an ellipsis, '...id,...jd->...ij', so that one "
    "equation serves (T, d), (B, T, d) and (B, H, T, d) alike")
TORCH_ERRORS = (
    ("view size is not compatible with input tensor's size and stride", VIEW_NOT_CONTIGUOUS),
    ("Boolean value of Tensor with more than one value is ambiguous", TENSOR_AS_BOOL),
    ("must be a 3D tensor", BMM_NOT_3D),
    ("'torch.return_types.", RETURN_TYPES_PAIR),
    ("and no ellipsis was given", EINSUM_FIXED_RANK),
)
# Python's own ValueErrors that no check expects: the student's own check rejecting a valid call, a shape
# unpacked into a fixed number of names.
OWN_CHECK_TOO_STRICT = recognised(
    GENERAL, "own_check_too_strict",
    "your own check raised ValueError on a valid call: its condition rejects inputs the contract accepts (< for "
    "<=, another dimension or size than the contract's)")
SHAPE_UNPACKED = recognised(
    GENERAL, "shape_unpacked",
    "you unpacked a tensor's shape into a fixed number of names (b, t, d = x.shape), but it came with another "
    "number of dimensions: read the sizes you need by index from the end (x.shape[-1], x.size(-2)) so that any "
    "leading dimensions pass")
UNPACKED = re.compile(r"(too many|not enough) values to unpack \(expected \d+")


# What the checks' weights, loaded by the contract's names, tell of an nn.Sequential numbered otherwise.
SEQUENTIAL_SHORT = recognised(
    GENERAL, "sequential_short",
    "your {seq} holds at index {got} the layer that the contract's holds at {want}: a module before it is missing "
    "(the activation between the layers?); nn.Sequential numbers every module it holds, activations and dropout too")
SEQUENTIAL_LONG = recognised(
    GENERAL, "sequential_long",
    "your {seq} holds at index {got} the layer that the contract's holds at {want}: it has a module too many before "
    "it; nn.Sequential numbers every module it holds, activations and dropout too")
UNLOADED = re.compile(r"has no parameters named \[([^\]]*)\] \(its parameters: \[([^\]]*)\]")


def sequential_shifted(message: str) -> "Known | None":
    """SEQUENTIAL_SHORT or _LONG (named with its fields) where each weight the student's module lacks (`message`: a WeightsMismatch's
    words) sits one index lower, or higher, in the same nn.Sequential of theirs, and nowhere else differs."""
    found = UNLOADED.search(message)
    if found is None:
        return None
    missing, own = (set(re.findall(r"'([^']+)'", group)) for group in found.groups())
    shifts = set()
    for key in missing:
        parts = re.fullmatch(r"(.+)\.(\d+)\.(weight|bias)", key)
        if parts is None:
            return None
        seq, index, param = parts[1], int(parts[2]), parts[3]
        moved = [d for d in (-1, 1) if f"{seq}.{index + d}.{param}" in own]
        if len(moved) != 1:
            return None
        shifts.add((seq, index, index + moved[0]))
    if len(shifts) != 1:
        return None
    (seq, want, got), = shifts
    return (SEQUENTIAL_SHORT if got < want else SEQUENTIAL_LONG).text(seq=seq, got=got, want=want)


def error_mistake(message: str, where: str = "", kinds: tuple[str, ...] = (),
                  own: Callable[[str, list[str], tuple[str, ...]], str | None] | None = None,
                  checks_own_inputs: bool = True) -> "Known | None":
    """The known mistake that an error raised in student code names, if it names one: torch's words
    for it (TORCH_ERRORS), a ValueError that no check expected (`where`: the student's frames, innermost last;
    `kinds`: the error's classes), or, asked before the ValueErrors, the checked component's own (`own`: its
    module's `named_error`, given the message, the frames and the kinds). (A load_state_dict of the wrong
    sizes is named by the state-dict checks, which know the contract's widths: LINEAR_WIDTHS.)

    `checks_own_inputs`: the refused call held only what the check made itself (no tensor that another call of
    student code returned, no cache that student code filled, `Target`'s `made_by_student`). Only such a call
    is known to be valid: a learner's function may rightly refuse what another of its functions produced."""
    entry = next((entry for words, entry in TORCH_ERRORS if words in message), None)
    if entry is not None:
        return entry
    frames = [line for line in where.splitlines() if line.strip()]
    known = own(message, frames, kinds) if own is not None else None
    if known is not None:
        return known
    if "ValueError" in kinds and frames:
        if UNPACKED.search(message) and (".shape" in frames[-1] or ".size()" in frames[-1]):
            return SHAPE_UNPACKED
        if len(frames) == 1 and re.search(r"\braise ValueError\b", frames[0]) and checks_own_inputs:
            return OWN_CHECK_TOO_STRICT
    return None


# A family: an nn.Linear sized with other widths among those the contract names (d_model, d_k, ...), each pair
# of names its own sentence, known by the weight's shape (out_features, in_features).
LINEAR_WIDTHS = mistake(
    GENERAL, "linear_widths",
    "your {layer} is nn.Linear({got_in}, {got_out}): the contract's is nn.Linear({want_in}, {want_out})", dict())


def linear_width_mistakes(layer: str, want: tuple[str, str], widths: dict[str, int]) -> Mistakes:
    """For the weight of the nn.Linear `layer`, whose (in_features, out_features) the contract names `want`:
    every other pair of the named `widths` (name -> size)."""
    return {LINEAR_WIDTHS.text(layer=layer, got_in=i, got_out=o, want_in=want[0], want_out=want[1]):
            torch.Size((widths[o], widths[i])) for i in widths for o in widths if (i, o) != want}

def biased_layer_mistakes(entry: Mistake, expected: set[str], layers: tuple[str, ...]) -> Mistakes:
    """For a module's set of state-dict keys (`expected`: the right ones, every nn.Linear bias=False): each
    nonempty proper subset of `layers` with a bias too (`entry`'s {layers}: the layers, comma-separated)."""
    subsets = [c for n in range(1, len(layers)) for c in itertools.combinations(layers, n)]
    return {entry.text(layers=", ".join(subset)): (lambda subset=subset: expected | {f"{name}.bias" for name in subset})
            for subset in subsets}


LOADED_SHAPE = re.compile(r"size mismatch for ([\w.]+): copying a param with shape torch\.Size\(\[([\d, ]*)\]\) from "
                          r"checkpoint, the shape in current model is torch\.Size\(\[([\d, ]*)\]\)")


def loaded_shapes(message: str, expected: dict[str, tuple[int, ...]]) -> dict[str, tuple[int, ...]] | None:
    """The shapes of the student's weights that a failed load_state_dict reveals (`message`: torch's words), the
    others taken as `expected`; None where the message names no size mismatch of these keys."""
    found = {key: tuple(int(d) for d in mine.split(",") if d.strip())
             for key, _, mine in LOADED_SHAPE.findall(message) if key in expected}
    return {**expected, **found} if found else None


def fitted_besides(models: Mistakes, fitted: Mistakes, got: Any) -> Mistakes:
    """The `fitted` members (models fitted to what came back, `got`), each silent where one of `models`, as
    computed, gives what came back too: a fit never speaks over a mistake modelled exactly (even one that its own
    family leaves unnamed)."""
    both = besides(models, fitted, got)
    return {known: both[known] for known in fitted}


def broadcast_clash(a: tuple[int, ...], b: tuple[int, ...]) -> set[int] | None:
    """The two sizes torch names when shapes `a` and `b` do not broadcast (it compares from the last dim), or None."""
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and 1 not in (x, y):
            return {x, y}
    return None


def keepdim_lost(message: str, shape: tuple[int, ...], dim: int = -1) -> bool:
    """Whether an error's words (`message`) are those of a reduction of a `shape` tensor over `dim` without
    keepdim=True, broadcast back against the tensor."""
    dim %= len(shape)
    clash = broadcast_clash(tuple(shape[:dim]) + tuple(shape[dim + 1:]), tuple(shape))
    return clash is not None and mismatched_sizes(message) == clash
