"""patch_embedding: `patchify` and `PatchEmbedding` in vit.py."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from checklib import adapters
from checklib.compare import assert_close, assert_equal, check_tensor, fail
from checklib.mistakes import patch_embedding as mistakes
from checklib.student import expect_value_error, naming_errors
from checklib.weights import linear_state, randn
from grader.text import Phrase

# (B, C, H, W, P): non-square images, one and three channels, P = 1, one patch per image.
IMAGES = [
    (2, 3, 8, 12, 4),
    (1, 1, 6, 6, 3),
    (2, 3, 4, 6, 1),
    (3, 1, 8, 4, 2),
    (1, 3, 6, 10, 2),
    (2, 3, 5, 5, 5),
]
ORDER = ("patches are numbered row by row (left to right, then top to bottom), and each patch is "
         "flattened channel first, then its rows, then its columns: (C, P, P), the order of F.unfold")
# (img_size, patch_size, in_channels, d_model)
EMBEDDINGS = [(8, 4, 3, 16), (6, 2, 1, 5), (4, 1, 3, 8), (12, 4, 1, 7), (6, 6, 3, 4)]


def image_ids(shape) -> str:
    return "B{}-C{}-H{}-W{}-P{}".format(*shape)


def embedding_ids(sizes) -> str:
    return "img{}-P{}-C{}-D{}".format(*sizes)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", IMAGES, ids=image_ids)
def test_patchify_matches_unfold(impl, gen, shape, dtype):
    # One patch per image is the images reshaped, which an echo of them gets right without the work:
    # such a case asks for two patches as well.
    batch, channels, height, width, patch = shape
    shapes = [shape] + ([(batch, channels, 2 * height, width, patch)] if (height, width) == (patch, patch) else [])
    for batch, channels, height, width, patch in shapes:
        images = randn(batch, channels, height, width, gen=gen, dtype=dtype)
        what = Phrase("patchify(images {tuple_images_shape}, patch_size={patch})",
                      tuple_images_shape=tuple(images.shape), patch=patch)
        with naming_errors(what, mistakes.SQUARE_ASSUMED,
                           lambda exc: mistakes.square_assumed(exc.message, tuple(images.shape), patch)):
            out = adapters.patchify(impl)(images, patch)
        n_patches = (height // patch) * (width // patch)
        patch_mistakes = mistakes.patchify_mistakes(images, patch, out)
        check_tensor(out, what=what, shape=(batch, n_patches, channels * patch * patch), dtype=dtype,
                     hint="the result is (B, N, C*P*P) with N = (H/P)*(W/P), in the images' dtype",
                     mistakes=patch_mistakes)
        assert_equal(out, F.unfold(images, patch, stride=patch).transpose(1, 2), what=what, hint=ORDER,
                     mistakes=patch_mistakes)


@pytest.mark.parametrize("height, width, patch", [(7, 8, 4), (8, 6, 4), (5, 5, 2), (9, 6, 2)])
def test_patchify_rejects_indivisible(impl, gen, height, width, patch):
    images = randn(1, 3, height, width, gen=gen)
    message = expect_value_error(adapters.patchify(impl), images, patch,
                                 what=Phrase("patchify(images {tuple_images_shape}, patch_size={patch})",
                                             tuple_images_shape=tuple(images.shape), patch=patch),
                                 lets_through=mistakes.patchify_checks(height, width, patch))
    assert message, "the ValueError should say what is wrong (H and W must be multiples of patch_size)"


def embedding(impl, gen, sizes, dtype=torch.float32):
    """A student PatchEmbedding with injected proj weights, and those weights."""
    img_size, patch, channels, d_model = sizes
    module = adapters.PatchEmbedding(impl, img_size, patch, channels, d_model)
    if dtype != torch.float32:
        module.to(dtype)
    state = linear_state("proj", channels * patch * patch, d_model, gen=gen, dtype=dtype)
    module.load_weights(state)
    return module, state


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sizes", EMBEDDINGS, ids=embedding_ids)
def test_patch_embedding_matches_strided_conv(impl, gen, sizes, dtype):
    img_size, patch, channels, d_model = sizes
    module, state = embedding(impl, gen, sizes, dtype)
    images = randn(2, channels, img_size, img_size, gen=gen, dtype=dtype)
    conv = nn.Conv2d(channels, d_model, patch, stride=patch, dtype=dtype)
    with torch.no_grad():
        conv.weight.copy_(state["proj.weight"].view(d_model, channels, patch, patch))
        conv.bias.copy_(state["proj.bias"])
        expected = conv(images).flatten(2).transpose(1, 2)
    out = module(images)
    what = Phrase("PatchEmbedding({img_size}, {patch}, {channels}, {d_model})(images {tuple_images_shape})",
                  img_size=img_size, patch=patch, channels=channels, d_model=d_model,
                  tuple_images_shape=tuple(images.shape))
    check_tensor(out, what=what, shape=expected.shape, dtype=dtype,
                 hint="the result is (B, num_patches, d_model): proj applied to every patch of patchify(images)")
    assert_close(out, expected, what=what,
                 hint="a linear map of each flattened patch is a convolution with kernel and stride P; "
                      "proj must take the patches exactly as patchify lays them out: " + ORDER,
                 mistakes=mistakes.embedding_mistakes(images, patch, state, out))


def test_same_module_on_other_images(impl, gen):
    """One module embeds image after image of the same shape: nothing it keeps from one call (the patches of the
    last images) may change another call's answer."""
    img_size, patch, channels, d_model = sizes = EMBEDDINGS[0]
    module, state = embedding(impl, gen, sizes)
    conv = nn.Conv2d(channels, d_model, patch, stride=patch)
    with torch.no_grad():
        conv.weight.copy_(state["proj.weight"].view(d_model, channels, patch, patch))
        conv.bias.copy_(state["proj.bias"])
    first = None
    for call in range(1, 4):
        images = randn(2, channels, img_size, img_size, gen=gen)
        first = images if first is None else first
        with torch.no_grad():
            expected = conv(images).flatten(2).transpose(1, 2)
        out = module(images)
        what = (Phrase("call {call} of the same PatchEmbedding({img_size}, {patch}, {channels}, {d_model}), other "
                       "images {tuple_images_shape} each time", call=call, img_size=img_size, patch=patch,
                       channels=channels, d_model=d_model, tuple_images_shape=tuple(images.shape)))
        check_tensor(out, what=what, shape=expected.shape, dtype=torch.float32,
                     hint="the result is (B, num_patches, d_model): proj applied to every patch of patchify(images)")
        assert_close(out, expected, what=what, hint="embed each call's own images: proj(patchify(images, P))",
                     mistakes=mistakes.embedding_again_mistakes(images, patch, state, first, out))


@pytest.mark.parametrize("sizes", EMBEDDINGS, ids=embedding_ids)
def test_num_patches(impl, sizes):
    img_size, patch, channels, d_model = sizes
    module = adapters.PatchEmbedding(impl, img_size, patch, channels, d_model)
    got = module.attr("num_patches")
    expected = (img_size // patch) ** 2
    if not got == expected:
        fail(f"PatchEmbedding({img_size}, {patch}, {channels}, {d_model}).num_patches", Phrase("expected {expected}, got {got}",
                                                                                               expected=expected,
                                                                                               got=repr(got)),
             hint=Phrase('a {img_size}x{img_size} image holds (img_size / patch_size) ** 2 patches', img_size=img_size),
             actual=got, expected=expected, mistakes=mistakes.num_patches_mistakes(img_size, patch))


@pytest.mark.parametrize("sizes", EMBEDDINGS, ids=embedding_ids)
def test_state_dict(impl, sizes):
    img_size, patch, channels, d_model = sizes
    module = adapters.PatchEmbedding(impl, img_size, patch, channels, d_model)
    state = module.state_dict()
    name = f"PatchEmbedding({img_size}, {patch}, {channels}, {d_model})"
    if sorted(state) != ["proj.bias", "proj.weight"]:
        fail(f"{name}.state_dict()", Phrase("expected exactly the keys ['proj.bias', 'proj.weight'], got "
                                            "{sorted_state}", sorted_state=sorted(state)),
             hint="the only parameters are those of proj = nn.Linear(in_channels * patch_size**2, d_model)"
    )
    hint = "proj = nn.Linear(in_channels * patch_size**2, d_model) maps one flattened patch to d_model features"
    check_tensor(state["proj.weight"], what=f"{name}.proj.weight", shape=(d_model, channels * patch * patch), hint=hint,
                 mistakes=mistakes.proj_shape_mistakes(patch, d_model, channels, img_size))
    check_tensor(state["proj.bias"], what=f"{name}.proj.bias", shape=(d_model,), hint=hint)


@pytest.mark.parametrize(
    "shape, problem",
    [((2, 1, 8, 8), "1 channel instead of 3"),
     ((2, 4, 8, 8), "4 channels instead of 3"),
     ((2, 3, 12, 12), "12x12 images instead of 8x8"),
     ((2, 3, 4, 4), "4x4 images instead of 8x8"),
     ((2, 3, 8, 12), "8x12 images instead of 8x8")],
    ids=["C1", "C4", "12x12", "4x4", "8x12"],
)
def test_patch_embedding_rejects_wrong_images(impl, gen, shape, problem):
    module, _ = embedding(impl, gen, (8, 4, 3, 16))
    images = randn(*shape, gen=gen)
    message = expect_value_error(module, images,
                                 what=Phrase("PatchEmbedding(8, 4, 3, 16) given images {shape} ({problem})",
                                             shape=shape, problem=problem),
                                 lets_through=mistakes.embedding_checks(shape[1] != 3))
    assert message, "the ValueError should say what is wrong (the images must be in_channels x img_size x img_size)"
