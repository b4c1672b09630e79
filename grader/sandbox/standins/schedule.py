"""Stand-in for lr_schedule: lr_at."""
from __future__ import annotations

import math


def lr_at(step: int, *, max_lr: float, min_lr: float, warmup_steps: int, total_steps: int) -> float:
    if step < 0 or warmup_steps < 0 or total_steps <= warmup_steps:
        raise ValueError("need step >= 0 and 0 <= warmup_steps < total_steps")
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step > total_steps:
        return min_lr
    return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * (step - warmup_steps) / (total_steps - warmup_steps)))
