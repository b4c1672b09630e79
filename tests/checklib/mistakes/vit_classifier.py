"""The known mistakes of `vit_classifier` (A Vision Transformer that learns): its entries, simulators and bundles
(see `checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import re
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ..catalogue import Known, Mistakes, mistake, recognised, simulated, variants
from .general import besides, unambiguous
from .patch_embedding import patches
from .pre_ln_block import block
from .qkv_projection import linear


# The contract's ViT in float64 from plain operations (patch_embedding's `patches`, pre_ln_block's `block`),
# with the mistake `variant` switched on.

ROW_MAJOR = (0, 2, 4, 1, 3, 5)  # `patches` in the contract's order: row-major patches, (C, P, P) inside


def vit(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int, n_layers: int,
        variant: str = "", read: int = 0) -> Tensor:
    """ViT's logits (B, n_classes) in eval mode, float64; the head reads token `read` (0: the class token)."""
    s = {k: v.double() for k, v in state.items()}
    x = linear(patches(images.double(), patch_size, ROW_MAJOR), s, "patch_embed.proj")
    batch, n, d_model = x.shape
    cls, pos = s["cls_token"].reshape(1, 1, d_model).expand(batch, 1, d_model), s["pos_emb"]
    if variant == "pos_before_cls":
        x = torch.cat([cls, x + pos[:, :n]], dim=1)
    elif variant == "pos_before_cls_offset":
        x = torch.cat([cls, x + pos[:, 1:]], dim=1)
    elif variant == "pos_rows_from_zero":
        x = torch.cat([cls + pos[:, :1], x + pos[:, :n]], dim=1)
    elif variant in ("appended", "appended_head_last"):
        x = torch.cat([x, cls], dim=1) + pos
    elif variant == "no_positions":
        x = torch.cat([cls, x], dim=1)
    elif variant == "one_position":
        x = torch.cat([cls, x], dim=1) + pos[:, batch]
    elif variant in ("row_0", "row_last"):  # one row for every token (the last: the class token looks appended)
        x = torch.cat([cls, x], dim=1) + pos[:, 0 if variant == "row_0" else -1]
    else:
        x = torch.cat([cls, x], dim=1) + pos

    def norm(h: Tensor) -> Tensor:
        return F.layer_norm(h, (d_model,), s["norm.weight"], s["norm.bias"], eps=1e-5)

    if variant == "norm_before_blocks":
        x = norm(x)
    layers = {"last_block_skipped": range(n_layers - 1), "first_block_skipped": range(1, n_layers),
              "blocks_read_embedding": range(n_layers - 1, n_layers)}.get(variant, range(n_layers))
    for i in layers:
        p = f"blocks.{n_layers - 1 if variant == 'shared_blocks' else i}."
        mask = torch.ones(x.size(1), x.size(1), dtype=torch.bool).tril() if variant == "causal_blocks" else None
        out = block({k.removeprefix(p): v for k, v in s.items() if k.startswith(p)}, x, mask, n_heads)
        x = x + out if variant == "block_residual_added" else out
        if variant == "norm_every_block":
            x = norm(x)
    if variant not in ("no_final_norm", "norm_every_block", "norm_before_blocks"):
        x = norm(x)
    if variant == "mean_pool":
        pooled = x.mean(dim=1)
    elif variant == "patch_mean_pool":
        pooled = x[:, 1:].mean(dim=1)
    elif variant in ("head_last", "appended_head_last"):
        pooled = x[:, -1]
    elif variant == "first_image":
        pooled = x[0]
    else:
        pooled = x[:, read]
    return linear(pooled, s, "head")


VIT_MISTAKES = variants("vit_classifier", ((sentence, variant) for variant, sentence in {
    "appended": "your class token is appended after the patches, and the head reads position 0, which is then "
                "the first patch: prepend it, torch.cat([cls, patches], dim=1)",
    "appended_head_last": "your class token is appended after the patches (position N, read back with x[:, -1]): "
                          "the contract's is prepended at position 0, so it gets pos_emb[:, 0] and the head "
                          "reads x[:, 0]",
    "pos_before_cls": "your positions are added to the patches before the class token is prepended (rows 0 .. N-1 "
                      "to the patches, none to the class token): prepend first, then add all N + 1 rows",
    "pos_before_cls_offset": "your positions are added to the patches (rows 1 .. N) before the class token is "
                             "prepended, so the class token never gets pos_emb[:, 0]: prepend first, then add "
                             "pos_emb",
    "pos_rows_from_zero": "your patches get pos_emb rows 0 .. N-1 while the class token gets row 0 too: the class "
                          "token's is row 0 and the patches' rows 1 .. N (prepend first, then add pos_emb)",
    "no_positions": "your ViT never adds pos_emb: without positions the blocks see the patches as a set",
    "one_position": "your ViT adds one row of pos_emb (pos_emb[:, B], indexed by the batch size) to every "
                    "token: add the whole table, x + pos_emb, one row per position",
    "row_0": "your ViT adds pos_emb's row 0, the class token's, to every token (pos_emb[:, 0] or pos_emb[:, :1]): "
             "add the whole table, x + pos_emb, one row per position",
    "row_last": "your ViT adds pos_emb's last row (pos_emb[:, -1]) to every token: add the whole table, "
                "x + pos_emb, one row per position",
    "mean_pool": "your head reads the mean over all tokens (mean pooling): the contract's reads the class token, "
                 "head(norm(x)[:, 0])",
    "head_last": "your head reads the last token (the last patch, x[:, -1]): the class token is at position 0, "
                 "head(norm(x)[:, 0])",
    "first_image": "your head reads x[0], every token of the first image, instead of x[:, 0], the class token of "
                   "every image: head(norm(x)[:, 0]) gives (B, n_classes)",
    "causal_blocks": "your blocks get a causal mask, as in a language model: a ViT's tokens all attend to each "
                     "other (the class token most of all), so call each block without a mask",
    "no_final_norm": "your ViT applies the head without the final norm: head(norm(x)[:, 0])",
    "norm_every_block": "your ViT applies the final norm after every block instead of once after the last: the "
                        "blocks normalise their own inputs, norm comes only before the head",
    "norm_before_blocks": "your ViT applies the final norm before the blocks, to the embeddings: each Pre-LN block "
                          "normalises its own input, and the final norm comes after the last block, just before "
                          "the head, head(norm(x)[:, 0])",
    "patch_mean_pool": "your head reads the mean over the patch tokens, x[:, 1:].mean(dim=1) (global average "
                       "pooling): the contract's ViT reads the class token, head(norm(x)[:, 0])",
    "last_block_skipped": "your ViT skips its last block (self.blocks[:-1], or range(len(self.blocks) - 1)): "
                          "run every block, for block in self.blocks: x = block(x)",
    "first_block_skipped": "your ViT skips its first block (self.blocks[1:]): run every block, for block in "
                           "self.blocks: x = block(x)",
    "blocks_read_embedding": "only your last block reaches the head: each block reads the patch embeddings, "
                             "not the previous block's output; chain them, x = block(x)",
    "block_residual_added": "your ViT adds a residual around each block, x = x + block(x): a TransformerBlock "
                            "already adds its own residuals, so x = block(x)",
    "shared_blocks": "all your blocks compute with the last block's weights: one TransformerBlock repeated "
                     "([block] * n_layers) is one module, so loading each block's weights overwrote the others; "
                     "create a new TransformerBlock for each layer",
}.items()))
VIT_VARIANTS = {m.name: m for m in VIT_MISTAKES}  # variant -> entry


# Known by the logits' shape only, (B, num_patches + 1, n_classes): the head applied to every token.
HEAD_READS_EVERY_TOKEN = recognised("vit_classifier", "head_reads_every_token",
                                    "your head reads every token: the logits are those of the class token only, "
                                    "head(norm(x)[:, 0])")


# A family: the head reading another token than the class token (the last one is head_last's).
VIT_READS = mistake("vit_classifier", "reads_token",
                    "your head reads token {index}, x[:, {index}]: the class token is prepended at position 0, and "
                    "the head reads it, head(norm(x)[:, 0])", dict())


def vit_mistakes(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int, n_layers: int
                 ) -> Mistakes:
    """For the ViT's logits; also the head reading token 1, 2, 3 or -2 (VIT_READS)."""
    def model(variant: str = "", read: int = 0) -> Tensor:
        return vit(state, images, patch_size=patch_size, n_heads=n_heads, n_layers=n_layers, variant=variant,
                   read=read)
    family = {VIT_READS.text(index=index): (lambda index=index: model(read=index)) for index in (1, 2, 3, -2)}
    return besides(simulated(VIT_MISTAKES, model), family)


CLS_WITHOUT_POSITION = mistake("vit_classifier", "cls_without_position",
                               "with no blocks your logits are head(norm(cls_token)): your class token gets no "
                               "position. Prepend it first, then add pos_emb, whose row 0 is the class token's",
                               dict(variant="no_positions"))


def vit_without_blocks_mistakes(state: dict[str, Tensor], images: Tensor, *, patch_size: int, n_heads: int
                                ) -> Mistakes:
    """For a ViT of no blocks, where the mistakes that leave the class token without a position look the same."""
    entries = [m for m in VIT_MISTAKES if m.name not in ("pos_before_cls", "pos_before_cls_offset", "no_positions")]
    return unambiguous(simulated([*entries, CLS_WITHOUT_POSITION], lambda variant: vit(
        state, images, patch_size=patch_size, n_heads=n_heads, n_layers=0, variant=variant)))


POS_EMB_PER_PATCH = recognised("vit_classifier", "pos_emb_per_patch",
                               "your pos_emb has {rows} rows, one per patch: the class token gets a position too, so "
                               "it is (1, num_patches + 1, d_model), added after the class token is prepended")
CLS_TOKEN_SHAPE = recognised("vit_classifier", "cls_token_shape",
                             "your cls_token is {shape}: the contract's is (1, 1, d_model), one token of a batch of "
                             "one, expanded to (B, 1, d_model) in forward")
NOT_LEARNED_BUFFER = recognised("vit_classifier", "not_learned_buffer",
                                "your {key} is a buffer (register_buffer): it is saved but never learned; make it an "
                                "nn.Parameter")
NOT_LEARNED_FROZEN = recognised("vit_classifier", "not_learned_frozen",
                                "your {key} is a Parameter with requires_grad=False, so it is never learned: the class "
                                "token and the positions are trained with the rest of the model")
UNUSED = recognised("vit_classifier", "unused",
                    "your {key} never reaches the logits (it is not used in forward, or used detached): {fix}")
MISSING_KEY = recognised("vit_classifier", "missing_key",
                         "your {key} is not in the state dict: a plain tensor attribute is neither saved nor learned; "
                         "make it an nn.Parameter named {key}")
DROPOUT_BY_DEFAULT = recognised("vit_classifier", "dropout_by_default",
                                "your ViT drops values in train mode even with dropout=0.0: pass dropout on to every "
                                "TransformerBlock(d_model, n_heads, d_ff, dropout) (the block's own default is 0.1), "
                                "and add no dropout of your own")
DROPOUT_DEFAULT_NOT_ZERO = recognised("vit_classifier", "dropout_default_not_zero",
                                      "your ViT's dropout does not default to 0.0: ViT(...) drops values in train "
                                      "mode, ViT(..., dropout=0.0) does not; the contract's default is dropout=0.0")
DROPOUT_DEFAULT_VALUE = recognised("vit_classifier", "dropout_default_value",
                                   "your ViT's dropout defaults to {p:g}: ViT(...) builds its blocks with "
                                   "nn.Dropout(p={p:g}), ViT(..., dropout=0.0) drops nothing; the contract's default "
                                   "is dropout=0.0")
DROPOUT_IGNORED = recognised("vit_classifier", "dropout_ignored",
                             "your ViT ignores dropout: with dropout=0.5 two calls in train mode gave the same logits; "
                             "pass it on to every TransformerBlock(d_model, n_heads, d_ff, dropout)")


def vit_shape_diagnosis(key: str, shape: tuple[int, ...], num_patches: int, d_model: int) -> "Known | None":
    """The diagnosis of a cls_token or pos_emb of the wrong shape."""
    if key == "pos_emb" and shape in ((1, num_patches, d_model), (num_patches, d_model)):
        return POS_EMB_PER_PATCH.text(rows=num_patches)
    if key == "cls_token" and shape in ((1, d_model), (d_model,)):
        return CLS_TOKEN_SHAPE.text(shape=shape)
    return None


def vit_load_diagnosis(message: str, num_patches: int, d_model: int) -> "Known | None":
    """A diagnosis for a load_state_dict that failed on the shape of cls_token or pos_emb (the message names it)."""
    for key in ("pos_emb", "cls_token"):
        if f"size mismatch for {key}" in message and "current model is torch.Size(" in message:
            shape = message.split(f"size mismatch for {key}", 1)[1].split("current model is torch.Size(", 1)[1]
            try:
                dims = tuple(int(d) for d in shape.split(")", 1)[0].strip("[]").split(",") if d.strip())
            except ValueError:
                return None
            return vit_shape_diagnosis(key, dims, num_patches, d_model)
    return None


def vit_not_learned_diagnosis(key: str, is_buffer: bool) -> "Known":
    return (NOT_LEARNED_BUFFER if is_buffer else NOT_LEARNED_FROZEN).text(key=key)


def vit_unused_diagnosis(key: str) -> "Known":
    return UNUSED.text(key=key, fix="prepend the class token to the patches" if key == "cls_token" else
                       "add pos_emb to the tokens once the class token is prepended")


BLOCKS_NOT_REGISTERED = recognised(
    "vit_classifier", "blocks_not_registered",
    "your blocks are not registered with the model: in a plain Python list (or tuple) their parameters are not "
    "the ViT's (no state dict entries, no training, no .to()); hold them in nn.ModuleList([...])")


def vit_missing_key_diagnosis(missing: set[str], present: set[str] | None = None) -> "Known | None":
    """Why the ViT lacks the parameters `missing`; `present`: those it has (given, the blocks held in a plain
    list are named where every missing one is a block's and none it has is numbered, as a ModuleList's are)."""
    for key in ("pos_emb", "cls_token"):
        if key in missing:
            return MISSING_KEY.text(key=key)
    if present is not None and missing and all(key.startswith("blocks.") for key in missing) and \
            not any(re.search(r"(^|\.)\d+\.", key) for key in present):
        return BLOCKS_NOT_REGISTERED.text()
    return None


def vit_dropout_diagnosis(default: bool, zero_drops: bool = True, rate: Any = None) -> "Known":
    """Why a ViT's dropout misbehaves: with its default (`default`), where an explicit dropout=0.0 drops values
    too (`zero_drops`) or does not (and the rate its first block's dropout got by default, if read); or a
    dropout of 0.5 that drops nothing."""
    if not default:
        return DROPOUT_IGNORED.text()
    if zero_drops:
        return DROPOUT_BY_DEFAULT.text()
    if isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate != 0:
        return DROPOUT_DEFAULT_VALUE.text(p=rate)
    return DROPOUT_DEFAULT_NOT_ZERO.text()


# torch's words for a mistake of this component's, in an error that no check caught (general.error_mistake)
CAT_NOT_EXPANDED = recognised(
    "vit_classifier", "cat_not_expanded",
    "you concatenated tensors whose other dimensions differ, one of them of size 1 there: torch.cat does not "
    "broadcast, so expand it first (a (1, 1, D) class token to the batch, .expand(B, -1, -1))")
# torch.cat's words for tensors of other sizes, one of them 1: CAT_NOT_EXPANDED
CAT_OF_SIZE_1 = re.compile(r"Sizes of tensors must match except in dimension \d+\. Expected size (1 but got size \d+"
                           r"|\d+ but got size 1\b)")


def named_error(message: str, frames: list[str], kinds: tuple[str, ...]) -> "Known | None":
    """The sentence of this component's mistake that an error of student code names (`frames`: the student's,
    innermost last; `kinds`: the error's classes), if any: `general.error_mistake` asks it."""
    if CAT_OF_SIZE_1.search(message) and frames and "cat(" in frames[-1]:
        return CAT_NOT_EXPANDED
    return None
