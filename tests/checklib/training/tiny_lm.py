"""The capstone's training task, defined once: for tiny_lm's graded training check (tests/test_tiny_lm.py)
and for `python -m grader train` (grader/train/command.py, through grader/checks_library.py).

Sequences are made of a random motif of `period` tokens repeated to `seq_len`,
so that from the second repetition on every next token is the one `period`
positions back. Nothing is downloaded; every batch and the initial weights come
from fixed seeds.

The loop (`remote_training`, which the vision track's task shares) talks to the
model through a `Target` (grader/engine/target.py) as the checks do: the weights
live on the grader's side and are updated there by `torch.optim.AdamW`; the
model is sent them, returns its logits, and backpropagates the loss's gradient
into its parameters. So the check (where the model runs in a sandboxed worker)
and the command (where it runs in a child
process on the learner's machine) train in exactly the same way.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import Tensor
from grader.text import Phrase

IGNORE = -100  # the targets of the first motif: nothing in the past predicts them


@dataclass(frozen=True)
class Task:
    """The next-token task and the model and training settings, all fixed."""

    vocab_size: int = 10
    period: int = 3
    seq_len: int = 12
    batch_size: int = 64  # a batch this size costs a step little more than 16 do, and halves the steps needed
    max_len: int = 24
    d_model: int = 32
    n_heads: int = 4
    n_kv_heads: int = 2
    n_layers: int = 1  # stacks are graded by the equivalence checks; one block learns the motif in 25 steps
    d_ff: int = 64
    steps: int = 25
    max_lr: float = 4e-2
    min_lr: float = 1e-3
    warmup_steps: int = 4
    weight_decay: float = 0.01
    seed: int = 7

    def model_args(self) -> tuple[int, ...]:
        """TinyLM's positional arguments: vocab_size, max_len, d_model, n_heads, n_kv_heads, n_layers, d_ff."""
        return (self.vocab_size, self.max_len, self.d_model, self.n_heads, self.n_kv_heads, self.n_layers, self.d_ff)

    def describe(self) -> str:
        """The task in a line, in English (a check's message; grader/check_text.py translates it)."""
        return (Phrase("TinyLM(vocab {self_vocab_size}, d_model {self_d_model}, {self_n_layers} layers, "
                       "{self_n_heads} heads, {self_n_kv_heads} kv heads, d_ff {self_d_ff}) on motifs of "
                       "{self_period} tokens repeated to {self_seq_len}, batches of {self_batch_size}",
                       self_vocab_size=self.vocab_size, self_d_model=self.d_model, self_n_layers=self.n_layers,
                       self_n_heads=self.n_heads, self_n_kv_heads=self.n_kv_heads, self_d_ff=self.d_ff,
                       self_period=self.period, self_seq_len=self.seq_len, self_batch_size=self.batch_size))

TASK = Task()
# The components whose code the training runs (through gpt.py's imports, the schedule and generate): those
# `python -m grader train` names when it meets a stub not started.
NEEDS = ("qkv_projection", "scaling", "masking", "head_splitting", "multi_head_attention", "kv_cache", "rms_norm",
         "rope", "swiglu", "grouped_query_attention", "lr_schedule", "sampling", "tiny_lm")


def motifs(task: Task, count: int, gen: torch.Generator) -> Tensor:
    """`count` random motifs `(count, period)`; no token repeats inside a motif."""
    return torch.stack([torch.randperm(task.vocab_size, generator=gen)[:task.period] for _ in range(count)])


def repeated(motif: Tensor, length: int) -> Tensor:
    """`(B, period)` -> `(B, length)`: the motifs repeated."""
    reps = -(-length // motif.size(1))
    return motif.repeat(1, reps)[:, :length]


def batch(task: Task, step: int) -> tuple[Tensor, Tensor]:
    """Inputs `(B, seq_len)` and targets `(B, seq_len)` (IGNORE where the first motif is not known yet)."""
    gen = torch.Generator().manual_seed(task.seed * 100_003 + step)
    tokens = repeated(motifs(task, task.batch_size, gen), task.seq_len + 1)
    idx, targets = tokens[:, :-1].clone(), tokens[:, 1:].clone()
    targets[:, :task.period - 1] = IGNORE
    return idx, targets


def initial_state(task: Task) -> dict[str, Tensor]:
    """The initial weights, by the contract's names (the same for every implementation)."""
    gen = torch.Generator().manual_seed(task.seed)

    def linear(d_out: int, d_in: int) -> Tensor:
        return (torch.rand(d_out, d_in, generator=gen) * 2 - 1) / math.sqrt(d_in)

    d, kv = task.d_model, task.n_kv_heads * (task.d_model // task.n_heads)
    state = {"tok_emb.weight": torch.randn(task.vocab_size, d, generator=gen)}
    for i in range(task.n_layers):
        p = f"blocks.{i}."
        state[p + "attn_norm.weight"] = torch.ones(d)
        state[p + "attn.w_q.weight"] = linear(d, d)
        state[p + "attn.w_k.weight"] = linear(kv, d)
        state[p + "attn.w_v.weight"] = linear(kv, d)
        state[p + "attn.out_proj.weight"] = linear(d, d)
        state[p + "ffn_norm.weight"] = torch.ones(d)
        state[p + "ffn.w_gate.weight"] = linear(task.d_ff, d)
        state[p + "ffn.w_up.weight"] = linear(task.d_ff, d)
        state[p + "ffn.w_down.weight"] = linear(d, task.d_ff)
    state["norm.weight"] = torch.ones(d)
    state["head.weight"] = linear(task.vocab_size, d)
    return state


class TrainingFailed(Exception):
    """The model returned something the training cannot use (the wrong shape, non-finite logits, no gradient)."""


def train(model: Any, task: Task, lr_at: Callable[[int], float], *, steps: int | None = None,
          on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train `model` (a RemoteObject of a TinyLM, built with `task.model_args()`) from `initial_state`; the losses.

    `lr_at(step)` gives each step's learning rate (see `remote_training`).
    """
    shape = (task.batch_size, task.seq_len, task.vocab_size)

    def loss_of(logits: Tensor, targets: Tensor) -> Tensor:
        return F.cross_entropy(logits.reshape(-1, task.vocab_size), targets.reshape(-1), ignore_index=IGNORE)

    return remote_training(model, "TinyLM(idx", initial_state(task), lambda step: batch(task, step), shape, loss_of,
                           steps=task.steps if steps is None else steps, lr=task.max_lr,
                           weight_decay=task.weight_decay, lr_at=lr_at, on_step=on_step)


def remote_training(model: Any, called: str, state: dict[str, Tensor], batch_at: Callable[[int], tuple[Tensor, Tensor]],
                    shape: tuple[int, ...], loss_of: Callable[[Tensor, Tensor], Tensor], *, steps: int, lr: float,
                    weight_decay: float, lr_at: Callable[[int], float] | None = None,
                    on_step: Callable[[int, float], None] | None = None) -> list[float]:
    """Train a RemoteObject `model` from the weights `state` with torch.optim.AdamW; the losses, one per step.

    The weights are the grader's: each step sends them to the model, reads its logits (they must have
    `shape`), and has it backpropagate the loss's gradient into its parameters. `called` names the call in
    messages ("TinyLM(idx"); `lr_at(step)`, when given, sets each step's learning rate.
    """
    params = {k: v.clone().requires_grad_(True) for k, v in state.items()}
    optimizer = torch.optim.AdamW(params.values(), lr=lr, weight_decay=weight_decay, foreach=True)
    losses = []
    for step in range(steps):
        if lr_at is not None:
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
        inputs, targets = batch_at(step)
        model.load_weights({k: v.detach() for k, v in params.items()})
        logits = model.forward_kept(inputs)
        if not isinstance(logits, Tensor) or tuple(logits.shape) != shape or not logits.is_floating_point():
            got = tuple(logits.shape) if isinstance(logits, Tensor) else type(logits).__name__
            call = f"{called} {tuple(inputs.shape)})"  # whole, so that a translation reads it as one call
            raise TrainingFailed(Phrase("step {step}: {call} returned {got}, expected logits {shape}", step=step,
                                        call=call, got=got, shape=shape))
        logits = logits.float().requires_grad_(True)
        loss = loss_of(logits, targets)
        if not torch.isfinite(loss):
            raise TrainingFailed(Phrase('step {step}: the loss is {loss_item}', step=step, loss_item=loss.item()))
        (grad_logits,) = torch.autograd.grad(loss, logits)
        grads = model.backward(grad_logits)["params"]
        for name, p in params.items():
            g = grads.get(name)
            if g is None:
                raise TrainingFailed(Phrase('step {step}: no gradient reached {name}', step=step, name=name))
            p.grad = g.to(p.dtype)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if on_step is not None:
            on_step(step, losses[-1])
    model.load_weights({k: v.detach() for k, v in params.items()})
    return losses


def schedule(task: Task, lr_at: Callable[..., float], steps: int | None = None) -> Callable[[int], float]:
    """`step -> lr` from an `lr_at(step, *, max_lr, min_lr, warmup_steps, total_steps)` (the contract's)."""
    total = max(task.steps if steps is None else steps, task.warmup_steps + 1)

    def lr(step: int) -> float:
        value = lr_at(step, max_lr=task.max_lr, min_lr=task.min_lr, warmup_steps=task.warmup_steps, total_steps=total)
        try:
            return float(value)
        except (TypeError, ValueError):
            raise TrainingFailed(Phrase("lr_at({step}, ...) returned {value}, not a number", step=step,
                                        value=format(repr(value), '.60'))) from None

    return lr


def prompts(task: Task, count: int = 4) -> Tensor:
    """Prompts `(count, 2 * period)` for the continuation: two repetitions of fresh motifs."""
    gen = torch.Generator().manual_seed(task.seed + 7)
    return repeated(motifs(task, count, gen), 2 * task.period)


def expected_continuation(task: Task, prompt: Tensor, length: int) -> Tensor:
    """The prompt continued by its motif to `length` tokens in all."""
    return repeated(prompt[:, :task.period], length)
