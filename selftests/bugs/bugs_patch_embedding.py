from . import Bug

PATTERN = 'rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)'

BUGS = [
    Bug("patch_embedding", "channels_last_in_patch", "vit.py",
        PATTERN, PATTERN.replace("(c p1 p2)", "(p1 p2 c)"),
        "flattens each patch pixel by pixel with the channels innermost, (P, P, C), instead of (C, P, P)",
        diagnosis=("patch_embedding:channels_innermost",)),
    Bug("patch_embedding", "column_major_patches", "vit.py",
        PATTERN, PATTERN.replace("(h w)", "(w h)"),
        "numbers the patches column by column instead of row by row",
        diagnosis=("patch_embedding:patches_column_by_column",)),
    Bug("patch_embedding", "pixels_column_major", "vit.py",
        PATTERN, PATTERN.replace("(c p1 p2)", "(c p2 p1)"),
        "flattens the pixels of each patch column by column",
        diagnosis=("patch_embedding:pixels_column_by_column",)),
    Bug("patch_embedding", "proj_input_size", "vit.py",
        "self.proj = nn.Linear(in_channels * patch_size**2, d_model)",
        "self.proj = nn.Linear(patch_size**2, d_model)",
        "sizes proj for one channel, forgetting that a flattened patch holds in_channels * P * P values",
        diagnosis=("patch_embedding:proj_for_one_channel",)),
    Bug("patch_embedding", "num_patches_precedence", "vit.py",
        "self.num_patches = (img_size // patch_size) ** 2",
        "self.num_patches = img_size // patch_size**2",
        "drops the parentheses, so ** binds first: img_size // (patch_size ** 2)",
        diagnosis=("patch_embedding:num_patches_precedence",)),
    Bug("patch_embedding", "no_image_shape_check", "vit.py",
        '        if images.dim() != 4 or tuple(images.shape[1:]) != expected:\n'
        '            raise ValueError(f"expected images (B, {\', \'.join(map(str, expected))}), got {tuple(images.shape)}")\n',
        "",
        "forgets to reject images of the wrong number of channels or size",
        named_by="expected a ValueError"),
    Bug("patch_embedding", "no_divisibility_check", "vit.py",
        '    if height % patch_size or width % patch_size:\n'
        '        raise ValueError(f"image size {height}x{width} is not a multiple of patch_size={patch_size}")\n',
        "",
        "forgets to reject images that the patches do not tile",
        named_by="expected a ValueError"),
    Bug("patch_embedding", "only_height_checked", "vit.py",
        "if height % patch_size or width % patch_size:",
        "if height % patch_size:",
        "checks only the height against the patch size (fine for square images only)",
        diagnosis=("patch_embedding:one_bad_side_let_through",)),
    Bug("patch_embedding", "assumes_square_images", "vit.py",
        "return " + PATTERN,
        "side = height // patch_size\n"
        "    patches = images.reshape(images.size(0), images.size(1), side, patch_size, side, patch_size)\n"
        "    return patches.permute(0, 2, 4, 1, 3, 5).reshape(images.size(0), side * side, -1)",
        "takes the number of patches per side from the height alone, as if every image were square",
        diagnosis=("patch_embedding:square_assumed",)),
]

# Members of the fitted order family (mistakes.PATCH_ORDER) that no single entry names.
BUGS += [
    Bug("patch_embedding", "unfold_without_permute", "vit.py", "return " + PATTERN,
        "b, c = images.shape[:2]\n    return images.unfold(2, patch_size, patch_size).unfold(3, patch_size, patch_size)"
        ".reshape(b, -1, c * patch_size ** 2)",
        "cuts the patches with unfold, (B, C, H/P, W/P, P, P), and reshapes without moving the channels after the grid",
        diagnosis=("patch_embedding:patch_order",)),
    Bug("patch_embedding", "columns_first_channels_last", "vit.py", PATTERN,
        PATTERN.replace("(h w) (c p1 p2)", "(w h) (p1 p2 c)"),
        "numbers the patches column by column and flattens each with the channels innermost",
        diagnosis=("patch_embedding:patch_order",)),
]

# A divisibility check that lets one bad side through (mistakes.ONE_BAD_SIDE_LET_THROUGH).
ONE_SIDE = ("patch_embedding:one_bad_side_let_through",)
BUGS += [
    Bug("patch_embedding", "check_and_not_or", "vit.py",
        "if height % patch_size or width % patch_size:", "if height % patch_size and width % patch_size:",
        "the divisibility check uses and: an image with only one side indivisible passes",
        diagnosis=ONE_SIDE),
    Bug("patch_embedding", "check_width_only", "vit.py",
        "if height % patch_size or width % patch_size:", "if width % patch_size:",
        "checks the width only, as if images were square",
        diagnosis=ONE_SIDE),
    Bug("patch_embedding", "check_pixel_count", "vit.py",
        "if height % patch_size or width % patch_size:", "if (height * width) % (patch_size * patch_size):",
        "checks that the pixel count divides into patches, not each side",
        diagnosis=ONE_SIDE),
]

# proj sized with another of the patches' widths (mistakes.general.LINEAR_WIDTHS).
BUGS += [
    Bug("patch_embedding", "proj_in_features_typo", "vit.py",
        "self.proj = nn.Linear(in_channels * patch_size**2, d_model)",
        "self.proj = nn.Linear(in_channels * patch_size * 2, d_model)",
        "typo: in_features C * P * 2 instead of C * P**2",
        diagnosis=("general:linear_widths",)),
    Bug("patch_embedding", "proj_arguments_swapped", "vit.py",
        "self.proj = nn.Linear(in_channels * patch_size**2, d_model)",
        "self.proj = nn.Linear(d_model, in_channels * patch_size**2)",
        "passes nn.Linear its sizes the wrong way round",
        diagnosis=("general:linear_widths",)),
    Bug("patch_embedding", "proj_missing_one_patch_side", "vit.py",
        "self.proj = nn.Linear(in_channels * patch_size**2, d_model)",
        "self.proj = nn.Linear(in_channels * patch_size, d_model)",
        "forgets one side of the patch: in_features C * P",
        diagnosis=("general:linear_widths",)),
]

# A forward check of one property of the images only (mistakes.CHANNELS_UNCHECKED).
BUGS += [
    Bug("patch_embedding", "channels_unchecked", "vit.py",
        "        expected = (self.in_channels, self.img_size, self.img_size)\n"
        "        if images.dim() != 4 or tuple(images.shape[1:]) != expected:",
        "        expected = (self.img_size, self.img_size)\n        if images.dim() != 4 or tuple(images.shape[2:]) != expected:",
        "checks the image size but not the channels", diagnosis=("patch_embedding:channels_unchecked",)),
    Bug("patch_embedding", "strided_patches", "vit.py",
        '"b c (h p1) (w p2) -> b (h w) (c p1 p2)"', '"b c (p1 h) (p2 w) -> b (h w) (c p1 p2)"',
        "writes the einops groups the other way round, (p1 h): each patch takes every (H/P)-th pixel",
        diagnosis=("patch_embedding:strided_patches",)),
    Bug("patch_embedding", "strided_rows", "vit.py",
        '"b c (h p1) (w p2) -> b (h w) (c p1 p2)"', '"b c (p1 h) (w p2) -> b (h w) (c p1 p2)"',
        "groups the rows as (p1 h) and the columns as (w p2)",
        diagnosis=("patch_embedding:strided_rows",)),
]

# Set 12 (session 10, core and vision): realistic slips in other idioms, named by the entries that exist
# or by the families widened the same day.
BUGS += [
    Bug('patch_embedding', 'unfold_no_transpose', 'vit.py',
        'return rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)',
        'return torch.nn.functional.unfold(images, patch_size, stride=patch_size)',
        "returns F.unfold's output without the transpose",
        diagnosis=("patch_embedding:unfold_layout",)),
    Bug('patch_embedding', 'reshape_only', 'vit.py',
        'return rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)',
        'return images.reshape(images.size(0), -1, images.size(1) * patch_size * patch_size)',
        'reshapes the images to (B, -1, C*P*P) without cutting them into patches',
        diagnosis=("patch_embedding:patch_order",)),
    Bug('patch_embedding', 'view_permute_channels_last', 'vit.py',
        'return rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)',
        'B, C, H, W = images.shape\n    p = patch_size\n    return images.view(B, C, H // p, p, W // p, p).permute(0, 2, 4, 3, 5, 1).reshape(B, -1, C * p * p)',
        'view + permute(0, 2, 4, 3, 5, 1), channels innermost',
        diagnosis=("patch_embedding:channels_innermost",)),
    Bug('patch_embedding', 'num_patches_not_squared', 'vit.py',
        'self.num_patches = (img_size // patch_size) ** 2',
        'self.num_patches = img_size // patch_size',
        'counts the patches along one side only',
        diagnosis=("patch_embedding:num_patches_one_side",)),
]

# Set 12 (session 10): the families added the same day (an unprojected input, a mask of other sizes, a fixed-rank
# einsum, out from k, scores as weights, one branch not dropped, overlapping unfold, a cache crossed, the sizes
# of causal_mask swapped, the shift's bounds), each with a sibling.
BUGS += [
    Bug('patch_embedding', 'unfold_no_stride', 'vit.py',
        'return rearrange(images, "b c (h p1) (w p2) -> b (h w) (c p1 p2)", p1=patch_size, p2=patch_size)',
        'return torch.nn.functional.unfold(images, patch_size).transpose(1, 2)',
        'F.unfold without stride=patch_size: overlapping windows',
        diagnosis=("patch_embedding:unfold_stride_1",)),
]

BUGS += [
    # State that survives a call (issue 30 §4): the patches kept on the module under the batch size.
    Bug("patch_embedding", "patches_kept", "vit.py",
        "        return self.proj(patchify(images, self.patch_size))\n",
        "        if getattr(self, \"patches\", None) is None or self.patches.size(0) != images.size(0):\n"
        "            self.patches = patchify(images, self.patch_size)  # patchified once per batch size\n"
        "        return self.proj(self.patches)\n",
        "keeps the patches of the first images of each batch size on the module and embeds them again for later "
        "images of the same shape",
        diagnosis=("patch_embedding:patches_kept",)),
]
