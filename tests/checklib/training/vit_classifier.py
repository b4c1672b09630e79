"""The vision track's training task, defined once: for vit_classifier's graded training check
(tests/test_vit_classifier.py).

Each image is noise with one bright square somewhere inside one of its four quadrants; the
label is that quadrant (0 top left, 1 top right, 2 bottom left, 3 bottom right), each quadrant
one patch. The square's place inside its patch varies, so the model has to find the patch that
holds it (attention) and tell where that patch is (the learned positions: without them the class
token sees the patches as a set, and every quadrant looks the same). Nothing is downloaded; every
batch and the initial weights come from fixed seeds.

As in the LLM track's task (tiny_lm.py), the loop (its `remote_training`) talks to the model through a
`Target`: the weights live on the grader's side and are updated there by `torch.optim.AdamW`;
the model is sent them, returns its logits, and backpropagates the loss's gradient into its
parameters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from .tiny_lm import TrainingFailed, remote_training
from grader.text import Phrase

__all__ = ["QUADRANTS", "VISION_TASK", "TrainingFailed", "VisionTask", "accuracy", "batch", "images", "initial_state",
           "train"]


@dataclass(frozen=True)
class VisionTask:
    """The quadrant task and the model and training settings, all fixed."""

    img_size: int = 8
    patch_size: int = 4  # a patch per quadrant
    in_channels: int = 1
    square: int = 2  # side of the bright square, in pixels
    brightness: float = 2.0
    noise: float = 0.5
    d_model: int = 16
    n_heads: int = 2
    n_layers: int = 2
    d_ff: int = 32
    batch_size: int = 32
    steps: int = 40
    lr: float = 1e-2
    weight_decay: float = 0.01
    init_scale: float = 1.0  # of the class token and the positions: tells the patches apart from step 0
    seed: int = 11

    @property
    def n_classes(self) -> int:
        return QUADRANTS

    def model_args(self) -> tuple[int, ...]:
        """ViT's positional arguments: img_size, patch_size, in_channels, n_classes, d_model, n_heads, n_layers,
        d_ff."""
        return (self.img_size, self.patch_size, self.in_channels, self.n_classes, self.d_model, self.n_heads,
                self.n_layers, self.d_ff)

    def describe(self) -> str:
        return (Phrase("ViT(img_size {self_img_size}, patch_size {self_patch_size}, d_model {self_d_model}, "
                       "{self_n_layers} layers, {self_n_heads} heads, d_ff {self_d_ff}) on telling which quadrant "
                       "of a noisy {self_img_size}x{self_img_size} image holds a bright "
                       "{self_square}x{self_square} square, batches of {self_batch_size}",
                       self_img_size=self.img_size, self_patch_size=self.patch_size, self_d_model=self.d_model,
                       self_n_layers=self.n_layers, self_n_heads=self.n_heads, self_d_ff=self.d_ff,
                       self_square=self.square, self_batch_size=self.batch_size))


QUADRANTS = 4
VISION_TASK = VisionTask()


def images(task: VisionTask, count: int, gen: torch.Generator) -> tuple[Tensor, Tensor]:
    """`count` images `(count, in_channels, img_size, img_size)` and their quadrants `(count,)` (int64)."""
    half = task.img_size // 2
    labels = torch.randint(0, QUADRANTS, (count,), generator=gen)
    offsets = torch.randint(0, half - task.square + 1, (count, 2), generator=gen)
    out = torch.randn(count, task.in_channels, task.img_size, task.img_size, generator=gen) * task.noise
    top = (labels // 2 * half + offsets[:, 0])[:, None]  # (count, 1): the square's first row and column
    left = (labels % 2 * half + offsets[:, 1])[:, None]
    pixels = torch.arange(task.img_size)
    rows = (pixels >= top) & (pixels < top + task.square)  # (count, img_size)
    cols = (pixels >= left) & (pixels < left + task.square)
    square = (rows[:, :, None] & cols[:, None, :])[:, None]  # (count, 1, img_size, img_size)
    return torch.where(square, out + task.brightness, out), labels


def batch(task: VisionTask, step: int) -> tuple[Tensor, Tensor]:
    """The images and labels of one training step."""
    return images(task, task.batch_size, torch.Generator().manual_seed(task.seed * 100_003 + step))


def initial_state(task: VisionTask) -> dict[str, Tensor]:
    """The initial weights, by the contract's names (the same for every implementation)."""
    gen = torch.Generator().manual_seed(task.seed)
    d, n = task.d_model, (task.img_size // task.patch_size) ** 2

    def linear(prefix: str, d_out: int, d_in: int) -> dict[str, Tensor]:
        return {f"{prefix}.weight": (torch.rand(d_out, d_in, generator=gen) * 2 - 1) / math.sqrt(d_in),
                f"{prefix}.bias": torch.zeros(d_out)}

    def norm(prefix: str) -> dict[str, Tensor]:
        return {f"{prefix}.weight": torch.ones(d), f"{prefix}.bias": torch.zeros(d)}

    state = linear("patch_embed.proj", d, task.in_channels * task.patch_size ** 2)
    state["cls_token"] = torch.randn(1, 1, d, generator=gen) * task.init_scale
    state["pos_emb"] = torch.randn(1, n + 1, d, generator=gen) * task.init_scale
    for i in range(task.n_layers):
        p = f"blocks.{i}."
        for name in ("w_q", "w_k", "w_v", "out_proj"):
            state.update(linear(p + "attention." + name, d, d))
        state.update(norm(p + "norm1"))
        state.update(norm(p + "norm2"))
        state.update(linear(p + "ff.0", task.d_ff, d))
        state.update(linear(p + "ff.2", d, task.d_ff))
    state.update(norm("norm"))
    state.update(linear("head", task.n_classes, d))
    return state


def train(model: Any, task: VisionTask, *, steps: int | None = None,
          on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train `model` (a RemoteObject of a ViT, built with `task.model_args()`) from `initial_state`; the losses.

    As the LLM track's (`remote_training`); the model stays in train mode (its dropout is 0).
    """
    return remote_training(model, "ViT(images", initial_state(task), lambda step: batch(task, step),
                           (task.batch_size, task.n_classes), F.cross_entropy,
                           steps=task.steps if steps is None else steps, lr=task.lr, weight_decay=task.weight_decay,
                           on_step=on_step)


def accuracy(model: Any, task: VisionTask, count: int = 64) -> float:
    """The trained model's accuracy on `count` fresh images (another seed than the training batches')."""
    x, labels = images(task, count, torch.Generator().manual_seed(task.seed + 7))
    logits = model(x)
    if not isinstance(logits, Tensor) or tuple(logits.shape) != (count, task.n_classes):
        got = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
        raise TrainingFailed(Phrase("ViT(images {tuple_x_shape}) returned {got}, expected logits "
                                    "{count_task_n_classes}", tuple_x_shape=tuple(x.shape), got=got,
                                    count_task_n_classes=(count, task.n_classes)))
    return float((logits.argmax(-1) == labels).float().mean())
