"""The known mistakes of `patch_embedding` (ViT patch embedding): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import itertools
import re
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Mistake, Mistakes, bind, mistake, recognised, simulated
from .general import LINEAR_WIDTHS, besides, linear_width_mistakes, one_bad_side
from .qkv_projection import linear


def patches(images: Tensor, patch: int, order: tuple[int, ...] = (0, 2, 4, 1, 3, 5), strided: str = "") -> Tensor:
    """Patchify with the dims of (B, C, h, P1, w, P2) permuted by `order` before flattening to (B, N, C*P*P);
    `strided` "rows", "columns" or "both": that side split as (P, H/P), so a patch takes every (H/P)-th pixel."""
    b, c, height, width = images.shape
    if strided:
        rows, cols = strided in ("rows", "both"), strided in ("columns", "both")
        grid = images.reshape(b, c, *((patch, height // patch) if rows else (height // patch, patch)),
                              *((patch, width // patch) if cols else (width // patch, patch)))
        images = grid.permute(0, 1, *((3, 2) if rows else (2, 3)), *((5, 4) if cols else (4, 5))).reshape(images.shape)
    grid = images.reshape(b, c, height // patch, patch, width // patch, patch).permute(*order)
    return grid.reshape(b, (height // patch) * (width // patch), c * patch * patch)


PATCH_MISTAKES = (
    mistake("patch_embedding", "channels_innermost",
            "your patches are flattened pixel by pixel with the channels innermost, (P, P, C): "
            "flatten each patch channel first, (C, P, P)", dict(order=(0, 2, 4, 3, 5, 1))),
    mistake("patch_embedding", "patches_column_by_column",
            "your patches are numbered column by column: number them row by row (left to right, then top to bottom)",
            dict(order=(0, 4, 2, 1, 3, 5))),
    mistake("patch_embedding", "pixels_column_by_column",
            "the pixels of each of your patches are flattened column by column: flatten (C, P, P) row by row",
            dict(order=(0, 2, 4, 1, 5, 3))),
)
STRIDED_PATCHES = (
    mistake("patch_embedding", "strided_patches",
            "your patches take every (H/P)-th row and every (W/P)-th column of the image ((p1 h) (p2 w) in einops, "
            "or a view as (P, H/P)): a patch is P adjacent rows and columns, b c (h p1) (w p2) -> b (h w) (c p1 p2)",
            dict(strided="both")),
    mistake("patch_embedding", "strided_rows",
            "your patches take every (H/P)-th row of the image ((p1 h) in einops, or a view as (P, H/P)): a patch is "
            "P adjacent rows, b c (h p1) (w p2) -> b (h w) (c p1 p2)", dict(strided="rows")),
    mistake("patch_embedding", "strided_columns",
            "your patches take every (W/P)-th column of the image ((p2 w) in einops, or a view as (P, W/P)): a patch "
            "is P adjacent columns, b c (h p1) (w p2) -> b (h w) (c p1 p2)", dict(strided="columns")),
)
UNFOLD_LAYOUT = mistake("patch_embedding", "unfold_layout",
                        "you returned F.unfold's layout (B, C*P*P, N): transpose it to (B, N, C*P*P)",
                        lambda images, patch: F.unfold(images, patch, stride=patch))
# F.unfold's stride left at its default of 1: every P x P window, overlapping, not the image cut into patches
UNFOLD_STRIDE_1 = mistake("patch_embedding", "unfold_stride_1",
                          "your patches overlap: F.unfold(images, patch_size) slides by its default stride of 1, giving "
                          "every P x P window; cut the image into patches with F.unfold(images, patch_size, "
                          "stride=patch_size)", lambda images, patch: F.unfold(images.double(), patch).transpose(1, 2))


def _unfold_stride_1(images: Tensor, patch: int, model: Callable[[Tensor], Any] = lambda t: t) -> Mistakes:
    """UNFOLD_STRIDE_1 where it differs from the right patches (a side longer than one patch)."""
    if max(images.shape[-2:]) <= patch:
        return {}
    return {UNFOLD_STRIDE_1: lambda: model(UNFOLD_STRIDE_1.model(images, patch))}


NUM_PATCHES_MISTAKES = (
    mistake("patch_embedding", "num_patches_precedence",
            "your num_patches is img_size // patch_size**2: ** binds before //, so write (img_size // patch_size) ** 2",
            lambda img_size, patch: img_size // patch**2),
    mistake("patch_embedding", "num_patches_one_side",
            "your num_patches counts the patches along one side only: an image holds (img_size // patch_size) ** 2",
            lambda img_size, patch: img_size // patch),
)
PROJ_FOR_ONE_CHANNEL = mistake("patch_embedding", "proj_for_one_channel",
                               "proj is sized for one channel: a flattened patch holds in_channels * patch_size**2 "
                               "values", lambda patch, d_model: torch.Size((d_model, patch * patch)))


ONE_BAD_SIDE_LET_THROUGH = recognised(
    "patch_embedding", "one_bad_side_let_through",
    "your check lets an image through when only one of its sides is not a multiple of patch_size: reject it when "
    "either is, height % patch_size or width % patch_size (an and there lets one bad side through)")


def patchify_checks(height: int, width: int, patch: int) -> dict[Mistake, bool]:
    return one_bad_side(height, width, patch, ONE_BAD_SIDE_LET_THROUGH)


CHANNELS_UNCHECKED = recognised(
    "patch_embedding", "channels_unchecked",
    "your PatchEmbedding checks the image size but not the channels: images with another number of channels get "
    "through to proj; raise ValueError unless images.shape[1:] == (in_channels, img_size, img_size)")
SIZE_UNCHECKED = recognised(
    "patch_embedding", "size_unchecked",
    "your PatchEmbedding checks the channels but not the image size: images of another size get through; raise "
    "ValueError unless images.shape[1:] == (in_channels, img_size, img_size)")


def embedding_checks(channels_wrong: bool) -> dict[Mistake, bool]:
    """For PatchEmbedding given wrong images: a check of one property only lets the other one's through."""
    return {CHANNELS_UNCHECKED: channels_wrong, SIZE_UNCHECKED: not channels_wrong}


SQUARE_ASSUMED = recognised("patch_embedding", "square_assumed",
                            "your patchify takes the number of patches per side from one side of the image, as if "
                            "every image were square: there are H / P rows and W / P columns of patches")


def square_assumed(message: str, images_shape: tuple[int, ...], patch: int) -> bool:
    """Whether an error says that (B, C, H, W) images were viewed with one side's patch count for both sides."""
    b, c, height, width = images_shape
    shape = re.search(r"shape '\[([\d, ]+)\]' is invalid", message)
    if height == width or shape is None:
        return False
    dims = [int(d) for d in shape[1].split(",")]
    return any(dims == [b, c, side // patch, patch, side // patch, patch] for side in (height, width))


# A family: the view (B, C, H/P, Py, W/P, Px) flattened in any other order, each order its own sentence.
PATCH_ORDER = mistake(
    "patch_embedding", "patch_order",
    "your patchify flattens the view (B, C, H/P, Py, W/P, Px) in the order ({names}), permute(0, {order}) "
    "(Py, Px: a pixel's row and column in its patch): the patches are (B, H/P, W/P, C, Py, Px) flattened, "
    "permute(0, 2, 4, 1, 3, 5), row-major patches of (C, P, P) each", dict())
PATCH_AXES = ("B", "C", "H/P", "Py", "W/P", "Px")
PATCH_NAMED = {(0, 2, 4, 1, 3, 5), *(m.model["order"] for m in PATCH_MISTAKES)}


def _patch_orders(images: Tensor, patch: int, model: Callable[[tuple[int, ...]], Any]) -> Mistakes:
    """The PATCH_ORDER family, where no axis of the view has size 1 (then every order gives its own patches)."""
    b, c, height, width = images.shape
    if min(b, c, height // patch, patch, width // patch) < 2:
        return {}
    return {text: (lambda order=order: model(order)) for text, order in _patch_order_texts()}


@functools.cache
def _patch_order_texts() -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((PATCH_ORDER.text(names=", ".join(PATCH_AXES[i] for i in (0, *rest)), order=", ".join(map(str, rest))),
                  (0, *rest)) for rest in itertools.permutations(range(1, 6)) if (0, *rest) not in PATCH_NAMED)


def patchify_mistakes(images: Tensor, patch: int, got: Any = None) -> Mistakes:
    """For patchify(images, patch) (which gave `got`); also every other order of the view (PATCH_ORDER)."""
    named = {**simulated(PATCH_MISTAKES, lambda order: patches(images, patch, order)),
             **_strided(images, patch, lambda **kw: patches(images, patch, **kw)),
             **bind([UNFOLD_LAYOUT], images, patch), **_unfold_stride_1(images, patch)}
    return besides(named, _patch_orders(images, patch, lambda order: patches(images, patch, order)), got)


def _strided(images: Tensor, patch: int, model: Callable[..., Any]) -> Mistakes:
    """STRIDED_PATCHES, where the strided side has more than one patch (with one, a strided patch is a patch)."""
    rows, cols = (size // patch > 1 for size in images.shape[-2:])
    return simulated([m for m in STRIDED_PATCHES if {"rows": rows, "columns": cols, "both": rows and cols}[
        m.model["strided"]]], model)


def embedding_mistakes(images: Tensor, patch: int, state: dict[str, Tensor], got: Any = None) -> Mistakes:
    def model(order=(0, 2, 4, 1, 3, 5), strided=""):
        return linear(patches(images, patch, order, strided), state, "proj")
    return besides({**simulated(PATCH_MISTAKES, model), **_strided(images, patch, model),
                    **_unfold_stride_1(images, patch, lambda t: linear(t, state, "proj"))},
                   _patch_orders(images, patch, model), got)


PATCHES_KEPT = mistake(
    "patch_embedding", "patches_kept",
    "your PatchEmbedding keeps the patches of an earlier call on the module and embeds them again for other images "
    "of the same shape: patchify each call's own images, and keep nothing of one call's input for the next",
    lambda earlier, patch, state: linear(patches(earlier, patch, (0, 2, 4, 1, 3, 5), ""), state, "proj"))


def embedding_again_mistakes(images: Tensor, patch: int, state: dict[str, Tensor], earlier: Tensor,
                             got: Any = None) -> Mistakes:
    """For PatchEmbedding called on `images` after a first call on `earlier`, of the same shape."""
    stale = {} if torch.equal(images, earlier) else bind([PATCHES_KEPT], earlier, patch, state)
    return {**embedding_mistakes(images, patch, state, got), **stale}


def num_patches_mistakes(img_size: int, patch: int) -> Mistakes:
    return bind(NUM_PATCHES_MISTAKES, img_size, patch)


def proj_shape_mistakes(patch: int, d_model: int, channels: int | None = None, img_size: int | None = None
                        ) -> Mistakes:
    """For proj.weight's shape; given the channels and image size, also proj sized with other widths among
    those of the patches (LINEAR_WIDTHS; proj_for_one_channel is one of them)."""
    named = bind([PROJ_FOR_ONE_CHANNEL], patch, d_model)
    if channels is None or img_size is None:
        return named
    widths = {"in_channels * patch_size**2": channels * patch * patch, "patch_size**2": patch * patch,
              "in_channels * patch_size": channels * patch, "in_channels * patch_size * 2": channels * patch * 2,
              "in_channels": channels, "patch_size": patch, "d_model": d_model, "img_size": img_size,
              "num_patches": (img_size // patch) ** 2}
    layer, want = "proj", ("in_channels * patch_size**2", "d_model")
    family = linear_width_mistakes(layer, want, widths)
    family.pop(LINEAR_WIDTHS.text(layer=layer, got_in="patch_size**2", got_out=want[1],  # proj_for_one_channel
                                  want_in=want[0], want_out=want[1]))
    return {**named, **family}
