"""The known mistakes of `lr_schedule` (Warmup and cosine decay): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Known, Mistake, Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, plus


def schedule(steps: list[int], max_lr: float, min_lr: float, warmup: int, total: int, variant: str = "", *,
             warmup_offsets: tuple[int, int] = (0, 0), progress_offsets: tuple[int, int] = (0, 0),
             cosine: tuple[str, str] = ("min_lr", "max_lr - min_lr"),
             rounding: Callable[[float], float] | None = None, factor: float | None = None) -> Tensor:
    """lr at each step (float64), with the mistake `variant` switched on, or the warmup's fraction
    (step + a) / (warmup_steps + b) and the cosine's progress (step - warmup_steps + a) / (total_steps -
    warmup_steps + b) off by the offsets (a, b) given, or the cosine base + 0.5 * amplitude * (1 + cos) of
    `cosine` (base, amplitude: "min_lr" or "0", "max_lr - min_lr", "max_lr" or "max_lr + min_lr"), or the progress rounded to a
    whole number by `rounding`, or the cosine's angle `factor` * progress instead of pi * progress."""
    out = []
    (wa, wb), (pa, pb) = warmup_offsets, progress_offsets
    for s in steps:
        if s < warmup:
            lr = {"plus_one": max_lr * (s + 1) / warmup, "nanogpt": max_lr * (s + 1) / (warmup + 1),
                  "to_one": s / warmup, "int_division": max_lr * (s // warmup),
                  "warmup_from_min_lr": min_lr + (max_lr - min_lr) * s / warmup,
                  "warmup_to_min_lr": min_lr * s / warmup, "warmup_over_total": max_lr * s / total}.get(
                      variant, max_lr * (s + wa) / (warmup + wb))
        elif s > total and variant != "cosine_continues":
            lr = 0.0 if variant == "zero_after" else max_lr if variant == "max_after" else min_lr
        else:
            progress = (s - warmup + pa) / (total - warmup + pb)
            if variant == "progress_from_0":
                progress = s / total
            elif variant == "over_total":
                progress = (s - warmup) / total
            elif variant == "step_over_decay":
                progress = s / (total - warmup)
            if rounding is not None:
                progress = rounding(progress)
            angle = progress if variant == "no_pi" else math.pi * progress
            if factor is not None:
                angle = factor * progress
            top, bottom = (min_lr, max_lr) if variant == "swapped" else (max_lr, min_lr)
            if variant == "no_floor":
                lr = 0.5 * max_lr * (1 + math.cos(angle))
            elif variant == "no_half":
                lr = min_lr + (max_lr - min_lr) * (1 + math.cos(angle))
            elif variant == "linear":
                lr = max_lr - (max_lr - min_lr) * progress
            elif variant == "no_one":
                lr = min_lr + 0.5 * (max_lr - min_lr) * math.cos(angle)
            else:
                base = {"min_lr": bottom, "0": 0.0, "max": 0.0}[cosine[0]]
                amplitude = {"max_lr - min_lr": top - bottom, "max_lr": top, "max_lr + min_lr": top + bottom}[cosine[1]]
                lr = base + 0.5 * amplitude * (1 + math.cos(angle))
                if cosine[0] == "max":  # clamped from below instead of shifted
                    lr = max(lr, min_lr)
        out.append(lr)
    return torch.tensor(out, dtype=torch.float64)


SCHEDULE_MISTAKES = variants("lr_schedule", {
    "your warmup is one step ahead: max_lr * (step + 1) / warmup_steps; the contract's starts at 0 "
    "(max_lr * step / warmup_steps)": "plus_one",
    "your warmup is nanoGPT's max_lr * (step + 1) / (warmup_steps + 1); the contract's is "
    "max_lr * step / warmup_steps": "nanogpt",
    "your warmup climbs to 1, not to max_lr: multiply step / warmup_steps by max_lr": "to_one",
    "your warmup uses integer division (step // warmup_steps), which is 0 until the warmup ends": "int_division",
    "your cosine decays to 0, not to min_lr: min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(...))": "no_floor",
    "your cosine counts its progress from step 0: it starts after the warmup, "
    "(step - warmup_steps) / (total_steps - warmup_steps)": "progress_from_0",
    "your cosine's progress divides by total_steps instead of total_steps - warmup_steps, so it never "
    "reaches min_lr": "over_total",
    "your cosine's progress is step / (total_steps - warmup_steps), counted from step 0 (it reaches 1 before "
    "total_steps): it starts after the warmup, (step - warmup_steps) / (total_steps - warmup_steps)":
        "step_over_decay",
    "your cosine lacks the factor 0.5: 0.5 * (1 + cos) runs from 1 to 0": "no_half",
    "your cosine lacks the 1 +: 0.5 * (1 + cos(pi * progress)) runs from 1 to 0, where 0.5 * cos runs from "
    "0.5 to -0.5": "no_one",
    "your cosine's angle is the progress itself, not pi times it": "no_pi",
    "your cosine runs from min_lr up to max_lr instead of down (max_lr and min_lr swapped, or 1 - cos where "
    "1 + cos belongs)": "swapped",
    "your decay is linear: the contract's is a cosine, 0.5 * (1 + cos(pi * progress))": "linear",
    "after total_steps your schedule returns 0: it stays at min_lr": "zero_after",
    "after total_steps your schedule goes back to max_lr: it stays at min_lr": "max_after",
    "your schedule has no floor after total_steps: the cosine goes on and rises again; every step > total_steps "
    "gives min_lr": "cosine_continues",
    "your warmup starts at min_lr: it climbs from 0, max_lr * step / warmup_steps": "warmup_from_min_lr",
    "your warmup climbs to min_lr: it climbs to max_lr, max_lr * step / warmup_steps": "warmup_to_min_lr",
    "your warmup divides by total_steps, max_lr * step / total_steps, so it ends far below max_lr: it climbs "
    "over the warmup only, max_lr * step / warmup_steps": "warmup_over_total",
})


LR_AS_TENSOR = mistake("lr_schedule", "lr_as_tensor",
                       "your lr_at returns a tensor holding the right value (torch.cos, torch.tensor): the "
                       "schedule is a plain float, computed with math.cos", lambda right: torch.tensor(right))


def tensor_lr_mistakes(right: float) -> Mistakes:
    """For what lr_at returned instead of a float, the right value being `right`."""
    return bind([LR_AS_TENSOR], right)


# Families: the warmup's fraction and the cosine's progress each off by one in numerator and/or denominator.
WARMUP_OFF_BY_ONE = mistake(
    "lr_schedule", "warmup_offsets",
    "your warmup is max_lr * ({numerator}) / ({denominator}): the contract's is max_lr * step / warmup_steps, "
    "0 at step 0 and max_lr at step warmup_steps",
    lambda steps, max_lr, min_lr, warmup, total, offsets: schedule(steps, max_lr, min_lr, warmup, total,
                                                                   warmup_offsets=offsets))
PROGRESS_OFF_BY_ONE = mistake(
    "lr_schedule", "progress_offsets",
    "your cosine's progress is ({numerator}) / ({denominator}): the contract's is (step - warmup_steps) / "
    "(total_steps - warmup_steps), 0 at the end of the warmup and 1 at total_steps",
    lambda steps, max_lr, min_lr, warmup, total, offsets: schedule(steps, max_lr, min_lr, warmup, total,
                                                                   progress_offsets=offsets))
OFFSETS = [(a, b) for a in (-1, 0, 1) for b in (-1, 0, 1) if (a, b) != (0, 0)]
# A family: the cosine's progress rounded to a whole number (integer division, round, ceil), 0 or 1, so the lr
# jumps between max_lr and min_lr instead of decaying.
PROGRESS_ROUNDED = mistake(
    "lr_schedule", "progress_rounded",
    "your cosine's progress is a whole number, {expr} (0 or 1), so the lr jumps between max_lr and min_lr instead "
    "of decaying: the progress is the true quotient, (step - warmup_steps) / (total_steps - warmup_steps), a float "
    "that runs from 0 to 1", lambda steps, max_lr, min_lr, warmup, total, rounding: schedule(
        steps, max_lr, min_lr, warmup, total, rounding=rounding))
PROGRESS_ROUNDINGS: dict[str, Callable[[float], float]] = {
    "(step - warmup_steps) // (total_steps - warmup_steps)": math.floor,
    "round((step - warmup_steps) / (total_steps - warmup_steps))": round,
    "math.ceil((step - warmup_steps) / (total_steps - warmup_steps))": math.ceil}
# A family: the cosine's angle another multiple of the progress than pi (the progress itself is no_pi).
COSINE_ANGLE = mistake(
    "lr_schedule", "cosine_angle",
    "your cosine's angle is {angle}: it is pi * progress, half a period, so that the lr falls from max_lr at the "
    "end of the warmup to min_lr at total_steps and no further",
    lambda steps, max_lr, min_lr, warmup, total, factor: schedule(steps, max_lr, min_lr, warmup, total,
                                                                  factor=factor))
COSINE_ANGLES = {"2 * pi * progress": 2 * math.pi, "pi / 2 * progress": math.pi / 2}
# A family: the cosine piece's base or amplitude without min_lr (both without it is no_floor).
COSINE_FORM = mistake(
    "lr_schedule", "cosine_form",
    "your cosine is {lr}: it runs from max_lr at the end of the warmup down to min_lr at total_steps, "
    "min_lr + 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))",
    lambda steps, max_lr, min_lr, warmup, total, form: schedule(steps, max_lr, min_lr, warmup, total, cosine=form))
COSINE_FORMS = {("0", "max_lr - min_lr"): "0.5 * (max_lr - min_lr) * (1 + cos(pi * progress))",
                ("min_lr", "max_lr"): "min_lr + 0.5 * max_lr * (1 + cos(pi * progress))",
                ("max", "max_lr"): "max(min_lr, 0.5 * max_lr * (1 + cos(pi * progress)))",
                ("max", "max_lr - min_lr"): "max(min_lr, 0.5 * (max_lr - min_lr) * (1 + cos(pi * progress)))",
                ("min_lr", "max_lr + min_lr"): "min_lr + 0.5 * (max_lr + min_lr) * (1 + cos(pi * progress))",
                ("0", "max_lr + min_lr"): "0.5 * (max_lr + min_lr) * (1 + cos(pi * progress))"}


def schedule_mistakes(steps: list[int], max_lr: float, min_lr: float, warmup: int, total: int,
                      got: Any = None) -> Mistakes:
    """For lr_at at `steps` (which gave `got`); also the warmup and the progress off by one (OFFSETS), the
    cosine's form (COSINE_FORMS) and its progress rounded (PROGRESS_ROUNDINGS)."""
    config = (steps, max_lr, min_lr, warmup, total)
    family = {text: entry.on(*config, offsets) for text, entry, offsets in _schedule_texts()}
    return besides(simulated(SCHEDULE_MISTAKES, lambda variant: schedule(*config, variant)), family, got)


@functools.cache
def _schedule_texts() -> tuple[tuple[str, Mistake, Any], ...]:
    warmup = [(WARMUP_OFF_BY_ONE.text(numerator=plus("step", a), denominator=plus("warmup_steps", b)),
               WARMUP_OFF_BY_ONE, (a, b)) for a, b in OFFSETS if (a, b) not in ((1, 0), (1, 1))]  # plus_one, nanogpt
    progress = [(PROGRESS_OFF_BY_ONE.text(numerator=plus("step - warmup_steps", a),
                                          denominator=plus("total_steps - warmup_steps", b)), PROGRESS_OFF_BY_ONE,
                 (a, b)) for a, b in OFFSETS]
    forms = [(COSINE_FORM.text(lr=written), COSINE_FORM, form) for form, written in COSINE_FORMS.items()]
    rounded = [(PROGRESS_ROUNDED.text(expr=expr), PROGRESS_ROUNDED, fn) for expr, fn in PROGRESS_ROUNDINGS.items()]
    angles = [(COSINE_ANGLE.text(angle=expr), COSINE_ANGLE, factor) for expr, factor in COSINE_ANGLES.items()]
    return tuple(warmup + progress + forms + rounded + angles)


# Python's words for a mistake of this component's, in an error that no check caught (general.error_mistake)
WARMUP_WITHOUT_STEPS = recognised(
    "lr_schedule", "warmup_without_steps",
    "your warmup divides by warmup_steps when it is 0 (step <= warmup_steps holds at step 0, or no test at all): "
    "with no warmup there is nothing to divide; warm up only while step < warmup_steps")


def named_error(message: str, frames: list[str], kinds: tuple[str, ...]) -> "Known | None":
    """The sentence of this component's mistake that an error of student code names (`frames`: the student's,
    innermost last; `kinds`: the error's classes), if any: `general.error_mistake` asks it."""
    if "ZeroDivisionError" in kinds and frames and "warmup" in frames[-1]:
        return WARMUP_WITHOUT_STEPS
    return None
