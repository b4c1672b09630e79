"""lr_schedule: `lr_at` in training.py (linear warmup, cosine decay, then a floor).

The expected values come from another formulation than the contract's: the warmup
as an interpolation between (0, 0) and (warmup_steps, max_lr), the decay as
min_lr + (max_lr - min_lr) * cos²(pi/2 * progress), since 0.5 * (1 + cos 2a) = cos² a.
"""
from __future__ import annotations

import math

import pytest
import torch

from checklib import adapters
from checklib.compare import assert_close, fail
from checklib.mistakes import lr_schedule as mistakes
from checklib.student import expect_value_error
from checklib.tolerance import ATOL, RTOL
from grader.text import Phrase

# (max_lr, min_lr, warmup_steps, total_steps): nanoGPT-like, a short warmup, no warmup, a one-step decay.
CONFIGS = [(6e-4, 6e-5, 10, 50), (1e-2, 1e-3, 3, 20), (3e-3, 1e-4, 0, 12), (1.0, 0.25, 4, 5)]
WHERE = ("max_lr * step / warmup_steps while step < warmup_steps; then min_lr + 0.5 * (max_lr - min_lr) * "
         "(1 + cos(pi * (step - warmup_steps) / (total_steps - warmup_steps))) up to total_steps; then min_lr")


def config_id(config) -> str:
    return "max{:g}-min{:g}-warmup{}-total{}".format(*config)


def expected(step: int, max_lr: float, min_lr: float, warmup: int, total: int) -> float:
    if step < warmup:
        return float(torch.linspace(0.0, max_lr, warmup + 1, dtype=torch.float64)[step])
    progress = min(1.0, (step - warmup) / (total - warmup))
    return min_lr + (max_lr - min_lr) * math.cos(math.pi / 2 * progress) ** 2


def schedule(impl, steps, max_lr, min_lr, warmup, total, what: str) -> torch.Tensor:
    lr_at = adapters.lr_at(impl)
    values = []
    for step in steps:
        lr = lr_at(step, max_lr=max_lr, min_lr=min_lr, warmup_steps=warmup, total_steps=total)
        if isinstance(lr, bool) or not isinstance(lr, (int, float)):
            right = expected(step, max_lr, min_lr, warmup, total)
            fail(Phrase('lr_at({step}, ...) in {what}', step=step, what=what), Phrase("expected a float, got "
                                                                                      "{type_lr___name__} {lr}",
                                                                                      type_lr___name__=type(lr).__name__,
                                                                                      lr=format(repr(lr), '.60')),
                 hint="return a plain Python float (math.cos, not torch.cos; no tensor)", actual=lr,
                 mistakes=mistakes.tensor_lr_mistakes(right))
        values.append(float(lr))
    return torch.tensor(values, dtype=torch.float64)


def check_phase(impl, steps, config, phase: str) -> None:
    max_lr, min_lr, warmup, total = config
    what = Phrase("the {phase} of lr_at(max_lr={max_lr}, min_lr={min_lr}, warmup_steps={warmup}, "
                  "total_steps={total})", phase=phase, max_lr=format(max_lr, 'g'), min_lr=format(min_lr, 'g'),
                  warmup=warmup, total=total)
    got = schedule(impl, steps, *config, what)
    want = torch.tensor([expected(s, *config) for s in steps], dtype=torch.float64)
    assert_close(got, want, what=Phrase("{what} at steps {steps_0}..{steps_1}", what=what, steps_0=steps[0],
                                        steps_1=steps[-1]), rtol=RTOL, atol=ATOL * max_lr,
                 hint=WHERE, mistakes=mistakes.schedule_mistakes(steps, *config, got))


@pytest.mark.parametrize("config", [c for c in CONFIGS if c[2] > 0], ids=config_id)
def test_warmup_is_linear_from_zero(impl, config):
    check_phase(impl, list(range(config[2])), config, "warmup")


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_cosine_decay_to_min_lr(impl, config):
    check_phase(impl, list(range(config[2], config[3] + 1)), config, "cosine decay")


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_whole_schedule(impl, config):
    """Every step from 0 to past the end, where it stays at min_lr."""
    check_phase(impl, list(range(config[3] + 6)), config, "whole schedule")


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_min_lr_after_total_steps(impl, config):
    max_lr, min_lr, warmup, total = config
    steps = [total + 1, total + 2, 2 * total + 7, 10**6]
    check_phase(impl, steps, config, "floor after total_steps")


@pytest.mark.parametrize("step, warmup, total", [(-1, 10, 100), (5, -1, 100), (5, 10, 10), (5, 10, 3)],
                         ids=["negative_step", "negative_warmup", "total_equals_warmup", "total_below_warmup"])
def test_rejects_bad_arguments(impl, step, warmup, total):
    message = expect_value_error(adapters.lr_at(impl), step, max_lr=1e-3, min_lr=1e-4, warmup_steps=warmup,
                                 total_steps=total, what=f"lr_at({step}, warmup_steps={warmup}, total_steps={total})")
    assert message, "the ValueError should say which argument is wrong"
