"""vit_classifier: `ViT` in vit.py, the whole Vision Transformer classifier.

Expected values come from a composition of PyTorch operations carrying the same injected
weights, in float64: the patches from `F.unfold`, `F.linear`, the class token prepended,
`pos_emb` added, each block an `nn.TransformerEncoderLayer(norm_first=True, activation="relu",
dropout=0, batch_first=True)` with the block's weights, `F.layer_norm` and the head on
position 0. In the worker PatchEmbedding and TransformerBlock (and the attention under it)
are trusted stand-ins.

The training check trains the model on the task of `checklib.training.vit_classifier`: the
grader holds the weights and steps them with `torch.optim.AdamW`.
"""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor

from checklib import adapters
from checklib.catalogue import Mistakes
from checklib.compare import assert_close, assert_not_close, check_tensor, fail, message_of
from checklib.mistakes import vit_classifier as mistakes
from checklib.scratch import assert_from_scratch
from checklib.training.vit_classifier import VISION_TASK, TrainingFailed, accuracy, train
from checklib.weights import block_state, layer_norm_state, linear_state, randn, torch_encoder_layer
from grader.engine.target import RemoteObject
from grader.sandbox.protocol import StudentError, WeightsMismatch
from checklib.student import where
from grader.text import Phrase

VIT = adapters.ViT
WHERE = ("tokens = patch_embed(images); x = cat([cls_token expanded to (B, 1, D), tokens], dim=1) + pos_emb; "
         "the blocks without a mask; logits = head(norm(x)[:, 0])")


# --------------------------------------------------------------------------- configurations and weights

def config(img_size, patch_size, in_channels, n_classes, d_model, n_heads, n_layers, d_ff) -> dict:
    return dict(img_size=img_size, patch_size=patch_size, in_channels=in_channels, n_classes=n_classes,
                d_model=d_model, n_heads=n_heads, n_layers=n_layers, d_ff=d_ff)


ARGS = ("img_size", "patch_size", "in_channels", "n_classes", "d_model", "n_heads", "n_layers", "d_ff")


def num_patches(cfg: dict) -> int:
    return (cfg["img_size"] // cfg["patch_size"]) ** 2


def vit_call(cfg: dict, dropout: float | None = None) -> str:
    return f"ViT({', '.join(str(cfg[k]) for k in ARGS)}" + ("" if dropout is None else f", dropout={dropout}") + ")"


def vit_state(cfg: dict, *, gen, dtype) -> dict[str, Tensor]:
    """Weights far from any default: a class token and positions of unit size, every norm off ones and zeros."""
    d, c, p = cfg["d_model"], cfg["in_channels"], cfg["patch_size"]
    state = linear_state("patch_embed.proj", c * p * p, d, gen=gen, dtype=dtype)
    state["cls_token"] = randn(1, 1, d, gen=gen, dtype=dtype)
    state["pos_emb"] = randn(1, num_patches(cfg) + 1, d, gen=gen, dtype=dtype)
    for i in range(cfg["n_layers"]):
        state.update(block_state(d, cfg["d_ff"], gen=gen, dtype=dtype, prefix=f"blocks.{i}."))
    state.update(layer_norm_state("norm", d, gen=gen, dtype=dtype))
    state.update(linear_state("head", d, cfg["n_classes"], gen=gen, dtype=dtype))
    return state


def reference_graph(s: dict[str, Tensor], images: Tensor, cfg: dict) -> Tensor:
    """The logits (B, n_classes) from PyTorch's own operations, as a function of the tensors in `s`."""
    d, p = cfg["d_model"], cfg["patch_size"]
    x = F.unfold(images, p, stride=p).transpose(1, 2)  # (B, N, C*P*P), row-major patches
    x = F.linear(x, s["patch_embed.proj.weight"], s["patch_embed.proj.bias"])
    x = torch.cat([s["cls_token"].expand(x.size(0), 1, d), x], dim=1) + s["pos_emb"]
    for i in range(cfg["n_layers"]):
        prefix = f"blocks.{i}."
        layer = torch_encoder_layer({k.removeprefix(prefix): v.detach() for k, v in s.items() if k.startswith(prefix)},
                                    d, cfg["n_heads"], cfg["d_ff"])
        x = layer(x)  # grad mode on keeps PyTorch off its fused inference path: the plain computation
    x = F.layer_norm(x, (d,), s["norm.weight"], s["norm.bias"], eps=1e-5)
    return F.linear(x[:, 0], s["head.weight"], s["head.bias"])


def reference(state: dict[str, Tensor], images: Tensor, cfg: dict) -> Tensor:
    """The logits in float64."""
    return reference_graph({k: v.double() for k, v in state.items()}, images.double(), cfg).detach()


def vit_mistakes(state: dict[str, Tensor], images: Tensor, cfg: dict) -> Mistakes:
    return mistakes.vit_mistakes(state, images, patch_size=cfg["patch_size"], n_heads=cfg["n_heads"],
                                 n_layers=cfg["n_layers"])


def new_vit(impl, cfg: dict, state: dict[str, Tensor] | None = None, *, dropout: float | None = None
            ) -> RemoteObject:
    """The student's ViT with `state` loaded (if given), in eval mode."""
    kwargs = {} if dropout is None else {"dropout": dropout}
    m = VIT(impl, *(cfg[k] for k in ARGS), **kwargs)
    if state is not None:
        if next(iter(state.values())).dtype == torch.float64:
            m.to(torch.float64)
        m.load_weights(state)
    m.eval()
    return m


def run(call, what: str, cfg: dict, *args):
    """A call of the student's model; a load of the weights that failed on a known mistake gets its diagnosis."""
    try:
        return call(*args)
    except StudentError as exc:
        if isinstance(exc, WeightsMismatch):
            lacked, _, has = exc.message.partition("(its parameters")  # the names it lacks, then those it has
            sentence = mistakes.vit_missing_key_diagnosis(set(re.findall(r"'([\w.]+)'", lacked)),
                                                          set(re.findall(r"'([\w.]+)'", has)))
        elif type(exc) is StudentError:
            sentence = mistakes.vit_load_diagnosis(exc.message, num_patches(cfg), cfg["d_model"])
        else:
            raise
        if sentence is None:
            raise
        # the grader's own words where the weights do not fit (as every component shows them), else what was raised
        problem = exc.describe() if isinstance(exc, WeightsMismatch) else \
            Phrase("loading the weights failed: {exc_type_name}: {exc_message}", exc_type_name=exc.type_name,
                   exc_message=exc.message) + where(exc)
        fail(what, problem, hint=WHERE, mistakes={sentence: True}, actual=True)


# --------------------------------------------------------------------------- layout

LAYOUT_CFG = config(8, 4, 3, 5, 12, 3, 2, 20)


def expected_shapes(cfg: dict) -> dict[str, tuple[int, ...]]:
    d, ff, c, p = cfg["d_model"], cfg["d_ff"], cfg["in_channels"], cfg["patch_size"]
    shapes = {"patch_embed.proj.weight": (d, c * p * p), "patch_embed.proj.bias": (d,), "cls_token": (1, 1, d),
              "pos_emb": (1, num_patches(cfg) + 1, d), "norm.weight": (d,), "norm.bias": (d,),
              "head.weight": (cfg["n_classes"], d), "head.bias": (cfg["n_classes"],)}
    for i in range(cfg["n_layers"]):
        shapes.update({k: tuple(v.shape) for k, v in block_state(d, ff, gen=torch.Generator().manual_seed(0),
                                                                  prefix=f"blocks.{i}.").items()})
    return shapes


def is_buffer(m: RemoteObject, name: str) -> bool:
    """Whether `name` is registered as a buffer (nn.Module.get_buffer raises for anything else)."""
    try:
        m.method("get_buffer", name)
    except StudentError:
        return False
    return True


def test_state_dict_layout(impl, gen):
    cfg = LAYOUT_CFG
    m = new_vit(impl, cfg)
    got = m.state_dict()
    shapes = expected_shapes(cfg)
    what = f"{vit_call(cfg)}.state_dict()"
    hint = ("patch_embed = PatchEmbedding(img_size, patch_size, in_channels, d_model), cls_token and pos_emb "
            "nn.Parameters, blocks = nn.ModuleList of n_layers TransformerBlock(d_model, n_heads, d_ff, dropout), "
            "norm = nn.LayerNorm(d_model), head = nn.Linear(d_model, n_classes)")
    if set(got) != set(shapes):
        missing, extra = set(shapes) - set(got), set(got) - set(shapes)
        sentence = mistakes.vit_missing_key_diagnosis(missing, set(got))
        fail(what, Phrase("missing keys {sorted_missing}, unexpected keys {sorted_extra}",
                          sorted_missing=sorted(missing), sorted_extra=sorted(extra)), hint=hint,
             mistakes={sentence: True} if sentence else None, actual=True)
    for key, shape in shapes.items():
        sentence = mistakes.vit_shape_diagnosis(key, tuple(got[key].shape), num_patches(cfg), cfg["d_model"])
        check_tensor(got[key], what=f"{what}['{key}']", shape=shape, dtype=torch.float32,
                     hint="cls_token is (1, 1, d_model); pos_emb holds a row for the class token and one per patch, "
                          "(1, num_patches + 1, d_model); the head maps d_model to n_classes",
                     mistakes={sentence: torch.Size(got[key].shape)} if sentence else None)
    for name in ("cls_token", "pos_emb"):
        if not m.tensor_info(name)["requires_grad"]:
            buffer = is_buffer(m, name)
            fail(f"{vit_call(cfg)}.{name}", "expected a learned nn.Parameter (requires_grad=True), got a "
                 + ("buffer" if buffer else "tensor with requires_grad=False"),
                 hint="ViT learns its class token and its positions: nn.Parameter(torch.zeros(...)) or of small "
                      "random values", mistakes={mistakes.vit_not_learned_diagnosis(name, buffer): True}, actual=True)
    # every block its own module: different weights loaded into each come back unchanged
    state = vit_state(cfg, gen=gen, dtype=torch.float32)
    m.load_weights(state)
    back = m.state_dict()
    for i in range(cfg["n_layers"]):
        key = f"blocks.{i}.norm1.weight"
        if not torch.equal(back[key], state[key]):
            last = torch.equal(back[key], state[f"blocks.{cfg['n_layers'] - 1}.norm1.weight"])
            fail(Phrase("{what}['{key}'] after loading different weights into each block", what=what, key=key),
                 Phrase("got the weights of another block (blocks.{cfg_n_layers_1})",
                        cfg_n_layers_1=cfg['n_layers'] - 1) if last else
                 "got other values than those loaded",
                 hint="blocks must hold n_layers separate TransformerBlock objects, one per layer",
                 mistakes={mistakes.VIT_VARIANTS["shared_blocks"]: True} if last else None, actual=True)


# --------------------------------------------------------------------------- values

# (img_size, patch_size, in_channels, n_classes, d_model, n_heads, n_layers, d_ff), B, dtype:
# one patch per image, one head, as many heads as features, three layers, 16 patches.
CASES = [
    (config(8, 4, 3, 5, 16, 4, 2, 24), 2, torch.float32),
    (config(8, 2, 1, 3, 8, 2, 1, 16), 3, torch.float64),
    (config(6, 3, 3, 4, 12, 3, 3, 20), 2, torch.float64),
    (config(4, 4, 1, 2, 8, 1, 2, 12), 2, torch.float32),
    (config(6, 2, 3, 7, 6, 6, 2, 10), 1, torch.float32),
    (config(8, 4, 1, 10, 16, 2, 2, 32), 4, torch.float64),
]
IDS = [f"{vit_call(c)}-B{b}-{str(d)[6:]}".replace(" ", "") for c, b, d in CASES]


@pytest.mark.parametrize("cfg, B, dtype", CASES, ids=IDS)
def test_vit_matches_reference(impl, gen, cfg, B, dtype):
    state = vit_state(cfg, gen=gen, dtype=dtype)
    images = randn(B, cfg["in_channels"], cfg["img_size"], cfg["img_size"], gen=gen, dtype=dtype)
    m = new_vit(impl, cfg, state, dropout=0.2)
    what = (Phrase("{vit_call_cfg_0_2}.eval()(images {tuple_images_shape}), {str_dtype_6}, vs the reference with "
                   "the same weights", vit_call_cfg_0_2=vit_call(cfg, 0.2), tuple_images_shape=tuple(images.shape),
                   str_dtype_6=str(dtype)[6:]))
    got = run(m, what, cfg, images)
    check_tensor(got, what=what, shape=(B, cfg["n_classes"]), dtype=dtype,
                 hint="the logits are (B, n_classes): the head of the class token only, in the images' dtype",
                 mistakes={**vit_mistakes(state, images, cfg),
                           mistakes.HEAD_READS_EVERY_TOKEN: torch.Size((B, num_patches(cfg) + 1, cfg["n_classes"]))})
    assert_close(got, reference(state, images, cfg).to(dtype), what=what, hint=WHERE,
                 mistakes=vit_mistakes(state, images, cfg))


# --------------------------------------------------------------------------- properties

PROPERTY_CFG = config(8, 2, 3, 4, 12, 3, 2, 20)  # 16 patches


def permuted_patches(images: Tensor, patch_size: int, perm: Tensor) -> Tensor:
    """The images with their patches moved: patch j of the result is patch perm[j] of `images`."""
    size = images.shape[-2:]
    cols = F.unfold(images, patch_size, stride=patch_size)
    return F.fold(cols[:, :, perm], size, patch_size, stride=patch_size)


def test_permuting_patches_changes_logits_only_through_positions(impl, gen):
    cfg = PROPERTY_CFG
    n = num_patches(cfg)
    state = vit_state(cfg, gen=gen, dtype=torch.float64)
    images = randn(2, cfg["in_channels"], cfg["img_size"], cfg["img_size"], gen=gen, dtype=torch.float64)
    perm = torch.randperm(n, generator=gen)
    while bool((perm == torch.arange(n)).all()):
        perm = torch.randperm(n, generator=gen)
    moved = permuted_patches(images, cfg["patch_size"], perm)
    moved_state = dict(state, pos_emb=torch.cat([state["pos_emb"][:, :1], state["pos_emb"][:, 1:][:, perm]], dim=1))
    m = new_vit(impl, cfg, state)
    call = vit_call(cfg)
    base = run(m, f"{call}(images)", cfg, images)
    check_tensor(base, what=Phrase("{call}(images {tuple_images_shape})", call=call,
                                   tuple_images_shape=tuple(images.shape)), shape=(2, cfg["n_classes"]),
                 dtype=torch.float64, hint="the logits are (B, n_classes)")
    m.load_weights(moved_state)
    after = m(moved)
    assert_close(after, base, what=Phrase("{call} on the images with their patches permuted by {perm_tolist} and "
                                          "the rows 1 .. {n} of pos_emb permuted alike, vs on the images as they "
                                          "were", call=call, perm_tolist=perm.tolist(), n=n),
                 hint="moving a patch together with its position must not change the logits: the blocks treat the "
                      "tokens as a set, so only pos_emb (row 1 + n for patch n, row 0 for the class token) says "
                      "where a patch was",
                 mistakes=vit_mistakes(moved_state, moved, cfg))
    m.load_weights(state)
    assert_not_close(m(moved), base, what=Phrase("{call} on the images with their patches permuted (pos_emb left "
                                                 "as it was) vs on the images as they were", call=call),
                     hint="the positions must reach the tokens: add pos_emb after prepending the class token")


def test_without_blocks_the_logits_are_the_class_token_s(impl, gen):
    """With n_layers=0 nothing mixes the tokens: the logits are head(norm(cls_token + pos_emb[:, 0])) for any image."""
    cfg = dict(PROPERTY_CFG, n_layers=0)
    state = vit_state(cfg, gen=gen, dtype=torch.float64)
    images = randn(3, cfg["in_channels"], cfg["img_size"], cfg["img_size"], gen=gen, dtype=torch.float64)
    m = new_vit(impl, cfg, state)
    what = Phrase("{vit_call_cfg}(images {tuple_images_shape}): no blocks, so only the class token reaches the head",
                  vit_call_cfg=vit_call(cfg), tuple_images_shape=tuple(images.shape))
    got = run(m, what, cfg, images)
    check_tensor(got, what=what, shape=(3, cfg["n_classes"]), dtype=torch.float64, hint="the logits are (B, n_classes)")
    assert_close(got, reference(state, images, cfg), what=what,
                 hint="the class token is prepended, at position 0, where it gets pos_emb[:, 0]; the head reads "
                      "position 0 after the final norm",
                 mistakes=mistakes.vit_without_blocks_mistakes(state, images, patch_size=cfg["patch_size"],
                                                               n_heads=cfg["n_heads"]))


def test_dropout_defaults_to_zero_and_follows_eval(impl, gen):
    cfg = config(8, 4, 3, 5, 16, 4, 2, 24)
    state = vit_state(cfg, gen=gen, dtype=torch.float64)
    images = randn(2, cfg["in_channels"], cfg["img_size"], cfg["img_size"], gen=gen, dtype=torch.float64)
    expected = reference(state, images, cfg)
    m = new_vit(impl, cfg, state)
    m.train()
    call = vit_call(cfg)
    first = run(m, f"{call}.train()(images)", cfg, images)
    check_tensor(first, what=Phrase("{call}.train()(images {tuple_images_shape})", call=call,
                                    tuple_images_shape=tuple(images.shape)), shape=expected.shape,
                 dtype=torch.float64, hint="the logits are (B, n_classes)")
    if not torch.equal(m(images), first):
        zero = new_vit(impl, cfg, state, dropout=0.0)  # a second look: the default, or dropout not passed on?
        zero.train()
        once = run(zero, f"{vit_call(cfg, 0.0)}.train()(images)", cfg, images)
        try:  # the rate the default gave the first block's dropout (the contract's submodules)
            rate = m.attr("blocks").method("__getitem__", 0).attr("dropout").attr("p")
        except (StudentError, AttributeError):
            rate = None
        fail(Phrase("two calls of {call} in train mode", call=call), "expected equal logits (the default dropout is 0.0), but they "
             "differ", hint="dropout defaults to 0.0 and is passed on to the blocks (TransformerBlock's own default "
             "is 0.1)", mistakes={mistakes.vit_dropout_diagnosis(True, not torch.equal(zero(images), once), rate):
                                  True}, actual=True)
    assert_close(first, expected, what=Phrase('{call} in train mode (default dropout=0.0) vs the reference', call=call),
                 hint="with dropout=0.0 train mode computes exactly what eval mode does",
                 mistakes=vit_mistakes(state, images, cfg))
    m = new_vit(impl, cfg, state, dropout=0.5)
    call = vit_call(cfg, 0.5)
    assert_close(run(m, f"{call}.eval()(images)", cfg, images), expected, what=Phrase("{call}.eval() vs the reference",
                                                                                      call=call),
                 hint="eval() turns dropout off", mistakes=vit_mistakes(state, images, cfg))
    m.train()
    first, second = m(images), m(images)
    if torch.equal(first, second):
        fail(Phrase("two calls of {call} in train mode", call=call), "expected the logits to differ (dropout draws a new mask on "
             "every call), but they are equal", hint="pass dropout on to every TransformerBlock",
             mistakes={mistakes.vit_dropout_diagnosis(False): True}, actual=True)
    m.eval()
    assert_close(m(images), expected, what=Phrase('{call} back in eval mode after train mode', call=call),
                 hint="eval() turns dropout off")


def test_gradients_reach_every_parameter(impl, gen):
    cfg = config(8, 4, 3, 5, 12, 3, 2, 20)
    state = vit_state(cfg, gen=gen, dtype=torch.float64)
    images = randn(2, cfg["in_channels"], cfg["img_size"], cfg["img_size"], gen=gen, dtype=torch.float64)
    m = new_vit(impl, cfg, state)
    g = randn(2, cfg["n_classes"], gen=gen, dtype=torch.float64)
    call = f"{vit_call(cfg)}.eval()(images)"
    grads = m.grad(images, grad_output=g)["params"]
    for name in state:
        if grads.get(name) is None:
            sentence = None
            if name in ("cls_token", "pos_emb"):
                if name not in grads:
                    sentence = (mistakes.vit_not_learned_diagnosis(name, True) if is_buffer(m, name)
                                else mistakes.vit_missing_key_diagnosis({name}))
                elif not m.tensor_info(name)["requires_grad"]:
                    sentence = mistakes.vit_not_learned_diagnosis(name, False)
                else:
                    sentence = mistakes.vit_unused_diagnosis(name)
            fail(Phrase("gradient of {call} w.r.t. {name}", call=call, name=name), "no gradient reached it" if name in grads else
                 "it is not a parameter of your model",
                 hint="every parameter must be used in forward, with no .detach() or torch.no_grad() in between",
                 mistakes={sentence: True} if sentence else None, actual=True)
    leaves = {k: v.double().clone().requires_grad_(k in ("cls_token", "pos_emb")) for k, v in state.items()}
    wanted = torch.autograd.grad((reference_graph(leaves, images, cfg) * g).sum(),
                                 [leaves["cls_token"], leaves["pos_emb"]])
    for name, want in zip(("cls_token", "pos_emb"), wanted):
        assert_close(grads[name], want, what=Phrase("gradient of {call} w.r.t. {name} vs the reference's", call=call,
                                                    name=name),
                     hint="the class token and every row of pos_emb must reach the logits as in " + WHERE)


def test_from_scratch(target_folder):
    """No library call that does the exercise (course.yml lists them for vit_classifier)."""
    assert_from_scratch(target_folder, "vit_classifier")


# --------------------------------------------------------------------------- training

# A correct ViT reaches a mean loss of about 0.11 over the last LAST steps and tells the quadrant of every
# fresh image (measured with the reference and with every alternative); a guess scores log(4) = 1.39, and
# a model without positions stays there. The bounds leave room for rounding.
LAST, LOSS_BOUND, REFERENCE_LOSS, ACCURACY_BOUND = 5, 0.6, 0.11, 0.85


def test_training_learns_which_quadrant_holds_the_square(impl):
    task = VISION_TASK
    m = VIT(impl, *task.model_args())
    what = Phrase("training {task_describe} for {task_steps} steps", task_describe=task.describe(),
                  task_steps=task.steps)
    try:
        losses = train(m, task)
        m.eval()
        correct = accuracy(m, task)
    except TrainingFailed as exc:
        fail(what, message_of(exc), hint="the model must return (B, n_classes) logits and backpropagate into every "
                                  "parameter, the class token and pos_emb included")
    final = sum(losses[-LAST:]) / LAST
    if not final < LOSS_BOUND:
        fail(what, Phrase("the loss went from {losses_0} to {final} (mean of the last {LAST} steps); a correct ViT "
                          "reaches about {REFERENCE_LOSS} in these steps, and the check asks for less than "
                          "{LOSS_BOUND}", losses_0=format(losses[0], '.3f'), final=format(final, '.3f'), LAST=LAST,
                          REFERENCE_LOSS=REFERENCE_LOSS, LOSS_BOUND=LOSS_BOUND), hint=WHERE + "; the positions are what tells the quadrants apart")
    if not correct >= ACCURACY_BOUND:
        fail(what, Phrase("after training (loss {final}) the model tells the quadrant of {correct} of fresh "
                          "images; a correct ViT gets them all, and the check asks for {ACCURACY_BOUND}",
                          final=format(final, '.3f'), correct=format(correct, '.0%'),
                          ACCURACY_BOUND=format(ACCURACY_BOUND, '.0%')),
             hint="in eval mode the trained model must compute what it computed in train mode (dropout is 0)")
