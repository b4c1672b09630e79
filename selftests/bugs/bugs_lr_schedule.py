from . import Bug

WARMUP = "return max_lr * step / warmup_steps"
PROGRESS = "progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 0 .. 1"
COSINE = "return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))"

BUGS = [
    Bug("lr_schedule", "warmup_off_by_one", "training.py", WARMUP,
        "return max_lr * (step + 1) / warmup_steps",
        "starts the warmup one step ahead",
        diagnosis=("lr_schedule:plus_one",)),
    Bug("lr_schedule", "nanogpt_warmup", "training.py", WARMUP,
        "return max_lr * (step + 1) / (warmup_steps + 1)",
        "uses nanoGPT's (step + 1) / (warmup_steps + 1) warmup",
        diagnosis=("lr_schedule:nanogpt",)),
    Bug("lr_schedule", "warmup_to_one", "training.py", WARMUP,
        "return step / warmup_steps",
        "ramps up to 1 instead of to max_lr",
        diagnosis=("lr_schedule:to_one",)),
    Bug("lr_schedule", "warmup_integer_division", "training.py", WARMUP,
        "return max_lr * (step // warmup_steps)",
        "uses integer division in the warmup",
        diagnosis=("lr_schedule:int_division",)),
    Bug("lr_schedule", "no_min_lr_floor", "training.py", COSINE,
        "return 0.5 * max_lr * (1 + math.cos(math.pi * progress))",
        "decays to 0 instead of to min_lr",
        diagnosis=("lr_schedule:no_floor",)),
    Bug("lr_schedule", "progress_from_zero", "training.py", PROGRESS,
        "progress = step / total_steps",
        "counts the cosine's progress from step 0 instead of from the end of the warmup",
        diagnosis=("lr_schedule:progress_from_0",)),
    Bug("lr_schedule", "progress_over_total", "training.py", PROGRESS,
        "progress = (step - warmup_steps) / total_steps",
        "divides the progress by total_steps instead of total_steps - warmup_steps",
        diagnosis=("lr_schedule:over_total",)),
    Bug("lr_schedule", "no_half", "training.py", COSINE,
        "return min_lr + (max_lr - min_lr) * (1 + math.cos(math.pi * progress))",
        "forgets the factor 0.5 of the cosine",
        diagnosis=("lr_schedule:no_half",)),
    Bug("lr_schedule", "no_pi", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(progress))",
        "takes the cosine of the progress instead of pi times it",
        diagnosis=("lr_schedule:no_pi",)),
    Bug("lr_schedule", "linear_decay", "training.py", COSINE,
        "return max_lr - (max_lr - min_lr) * progress",
        "decays linearly instead of along a cosine",
        diagnosis=("lr_schedule:linear",)),
    Bug("lr_schedule", "zero_after_total", "training.py", "    if step > total_steps:\n        return min_lr",
        "    if step > total_steps:\n        return 0.0",
        "returns 0 after total_steps instead of min_lr",
        diagnosis=("lr_schedule:zero_after",)),
    Bug("lr_schedule", "returns_tensor", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr - min_lr) * (1 + torch.cos(torch.tensor(math.pi * progress)))",
        "returns a tensor from torch.cos instead of a float",
        diagnosis=("lr_schedule:lr_as_tensor",)),
    Bug("lr_schedule", "accepts_total_equal_warmup", "training.py", "total_steps <= warmup_steps:",
        "total_steps < warmup_steps:",
        "accepts total_steps == warmup_steps, which divides by zero",
        named_by="expected a ValueError"),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("lr_schedule", "cosine_without_one", "training.py", "(1 + math.cos(math.pi * progress))",
        "(math.cos(math.pi * progress))",
        "forgets the 1 + of the cosine",
        diagnosis=("lr_schedule:no_one",)),
]

# Members of the fitted off-by-one families (mistakes.WARMUP_OFF_BY_ONE, PROGRESS_OFF_BY_ONE) that no single
# entry names.
BUGS += [
    Bug("lr_schedule", "progress_over_one_step_less", "training.py", PROGRESS,
        "progress = (step - warmup_steps) / (total_steps - warmup_steps - 1)  # 0 .. 1",
        "counts the decay's steps one short, so the cosine reaches min_lr a step early and overshoots",
        diagnosis=("lr_schedule:progress_offsets",)),
    Bug("lr_schedule", "warmup_over_one_step_less", "training.py", WARMUP,
        "return max_lr * step / (warmup_steps - 1)",
        "divides the warmup by warmup_steps - 1, so it reaches max_lr a step early",
        diagnosis=("lr_schedule:warmup_offsets",)),
]

# A piece of the schedule without min_lr or past its boundary (mistakes.COSINE_FORM, the cosine_continues and
# warmup_from_min_lr variants): held-out set 8's cosine_without_min_lr and no_floor_after_total, and siblings.
COSINE = "return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))"
BUGS += [
    Bug("lr_schedule", "cosine_without_min_lr", "training.py", COSINE,
        "return 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi * progress))",
        "the cosine forgets to add min_lr back, so it runs from max_lr - min_lr down to 0",
        diagnosis=("lr_schedule:cosine_form",)),
    Bug("lr_schedule", "cosine_amplitude_max_lr", "training.py", COSINE,
        "return min_lr + 0.5 * max_lr * (1 + math.cos(math.pi * progress))",
        "the cosine's amplitude is max_lr, so it starts at max_lr + min_lr",
        diagnosis=("lr_schedule:cosine_form",)),
    Bug("lr_schedule", "no_floor_after_total", "training.py", "    if step > total_steps:\n        return min_lr\n", "",
        "no min_lr after total_steps: the cosine rises again", diagnosis=("lr_schedule:cosine_continues",)),
    Bug("lr_schedule", "warmup_from_min_lr", "training.py", "return max_lr * step / warmup_steps",
        "return min_lr + (max_lr - min_lr) * step / warmup_steps", "the warmup climbs from min_lr instead of 0",
        diagnosis=("lr_schedule:warmup_from_min_lr",)),
]
BUGS += [
    Bug("lr_schedule", "cosine_clamped_to_min_lr", "training.py", COSINE,
        "return max(min_lr, 0.5 * max_lr * (1 + math.cos(math.pi * progress)))",
        "GPT-NeoX's old form: a cosine to 0 clamped at min_lr instead of one shifted up to it",
        diagnosis=("lr_schedule:cosine_form",)),
]
BUGS += [
    Bug("lr_schedule", "warmup_to_min_lr", "training.py", "return max_lr * step / warmup_steps",
        "return min_lr * step / warmup_steps", "the warmup climbs to min_lr instead of max_lr",
        diagnosis=("lr_schedule:warmup_to_min_lr",)),
]

# The cosine's progress rounded to a whole number (mistakes.PROGRESS_ROUNDED): held-out set 10's progress_floor, and
# a sibling.
BUGS += [
    Bug("lr_schedule", "progress_integer_division", "training.py", PROGRESS,
        "progress = (step - warmup_steps) // (total_steps - warmup_steps)  # 0 .. 1",
        "divides with // in the progress, so the lr stays at max_lr until total_steps",
        diagnosis=("lr_schedule:progress_rounded",)),
    Bug("lr_schedule", "progress_rounded", "training.py", PROGRESS,
        "progress = round((step - warmup_steps) / (total_steps - warmup_steps))  # 0 .. 1",
        "rounds the progress, so the lr drops from max_lr to min_lr half-way",
        diagnosis=("lr_schedule:progress_rounded",)),
    Bug("lr_schedule", "warmup_test_inclusive", "training.py",
        "    if step < warmup_steps:\n        return max_lr * step / warmup_steps",
        "    if step <= warmup_steps:\n        return max_lr * step / warmup_steps",
        "warms up while step <= warmup_steps, which divides by zero when there is no warmup",
        diagnosis=("lr_schedule:warmup_without_steps",)),
    Bug("lr_schedule", "progress_step_over_decay", "training.py",
        "progress = (step - warmup_steps) / (total_steps - warmup_steps)",
        "progress = step / (total_steps - warmup_steps)",
        "counts the cosine's progress from step 0 over the decay's length",
        diagnosis=("lr_schedule:step_over_decay",)),
    Bug("lr_schedule", "one_minus_cosine", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr - min_lr) * (1 - math.cos(math.pi * progress))",
        "writes 1 - cos instead of 1 + cos, so the decay climbs",
        diagnosis=("lr_schedule:swapped",)),
    Bug("lr_schedule", "progress_over_one_step_more", "training.py", PROGRESS,
        "progress = (step - warmup_steps) / (total_steps - warmup_steps + 1)",
        "divides the progress by one step more than the decay has",
        diagnosis=("lr_schedule:progress_offsets",)),
    Bug("lr_schedule", "cosine_amplitude_sum", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr + min_lr) * (1 + math.cos(math.pi * progress))",
        "adds min_lr to max_lr in the cosine's amplitude where it subtracts it",
        diagnosis=("lr_schedule:cosine_form",)),
    Bug("lr_schedule", "two_pi_cosine", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(2 * math.pi * progress))",
        "takes the cosine of 2 pi times the progress, a full period that climbs back to max_lr",
        diagnosis=("lr_schedule:cosine_angle",)),
    Bug("lr_schedule", "half_pi_cosine", "training.py", COSINE,
        "return min_lr + 0.5 * (max_lr - min_lr) * (1 + math.cos(math.pi / 2 * progress))",
        "takes the cosine of pi / 2 times the progress, a quarter period that stops halfway down",
        diagnosis=("lr_schedule:cosine_angle",)),
    Bug("lr_schedule", "warmup_over_total_steps", "training.py", "return max_lr * step / warmup_steps",
        "return max_lr * step / total_steps",
        "divides the warmup's step by total_steps",
        diagnosis=("lr_schedule:warmup_over_total",)),
]
