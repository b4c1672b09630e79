from . import Bug

STEP = 'state["step"] += 1'
DECAY = "p.mul_(1 - lr * wd)  # decoupled: the decay never goes through m and v"
M = "m.mul_(b1).add_(g, alpha=1 - b1)"
DENOM = "denom = (v / (1 - b2**t)).sqrt_().add_(eps)"
UPDATE = "p.addcdiv_(m, denom, value=-lr / (1 - b1**t))"
READ = 'lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]'
GRADS = "grads = [p.grad for p in parameters if p.grad is not None]  # the iterable is read once"
NORM = "norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))"
COEF = "coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)"
CLIP = GRADS + "\n    " + NORM + "\n    " + COEF + "\n    for g in grads:\n        g.mul_(coef.to(g.dtype))"
LOOP = '        for group in self.param_groups:  # read at every step: a schedule may have changed lr\n            lr, (b1, b2), eps, wd = group["lr"], group["betas"], group["eps"], group["weight_decay"]\n            for p in group["params"]:\n                if p.grad is None:\n                    continue\n                state = self.state[p]\n                if not state:\n                    state["step"] = 0\n                    state["m"] = torch.zeros_like(p)\n                    state["v"] = torch.zeros_like(p)\n                state["step"] += 1\n                t, m, v, g = state["step"], state["m"], state["v"], p.grad'
BODY = """                t, m, v, g = state["step"], state["m"], state["v"], p.grad
                p.mul_(1 - lr * wd)  # decoupled: the decay never goes through m and v
                m.mul_(b1).add_(g, alpha=1 - b1)
                v.mul_(b2).addcmul_(g, g, value=1 - b2)
                denom = (v / (1 - b2**t)).sqrt_().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - b1**t))"""

BUGS = [
    Bug("optimizer", "global_step", "training.py", LOOP,
        "        self.t = getattr(self, 't', 0) + 1\n" + LOOP.replace('t, m, v, g = state["step"]', "t, m, v, g = self.t"),
        "bias-corrects with one step counter for the optimizer instead of each parameter's own",
        diagnosis=("optimizer:global_step",)),
    Bug("optimizer", "adam_l2_decay", "training.py", DECAY,
        "g = g + wd * p",
        "adds the decay to the gradient (Adam with L2) instead of decaying the weights",
        diagnosis=("optimizer:l2",)),
    Bug("optimizer", "decay_after_update", "training.py", BODY,
        BODY.replace("                " + DECAY + "\n", "") + "\n                p.mul_(1 - lr * wd)",
        "decays the parameter after the Adam update instead of before",
        diagnosis=("optimizer:decay_after",)),
    Bug("optimizer", "decay_without_lr", "training.py", DECAY,
        "p.mul_(1 - wd)",
        "decays by 1 - wd, forgetting the learning rate",
        diagnosis=("optimizer:decay_without_lr",)),
    Bug("optimizer", "eps_inside_sqrt", "training.py", DENOM,
        "denom = (v / (1 - b2**t) + eps).sqrt()",
        "adds eps inside the square root",
        diagnosis=("optimizer:eps_inside",)),
    Bug("optimizer", "beta2_for_m", "training.py", M,
        "m.mul_(b2).add_(g, alpha=1 - b2)",
        "uses beta2 for the first moment",
        diagnosis=("optimizer:b2_for_m",)),
    Bug("optimizer", "no_bias_correction", "training.py", DENOM + "\n                " + UPDATE,
        "denom = v.sqrt().add_(eps)\n                p.addcdiv_(m, denom, value=-lr)",
        "leaves out the bias corrections",
        diagnosis=("optimizer:no_bias_correction",)),
    Bug("optimizer", "lr_read_once", "training.py", READ,
        'lr, (b1, b2), eps, wd = self.defaults["lr"], group["betas"], group["eps"], group["weight_decay"]',
        "reads the learning rate from the constructor's defaults, so a schedule never changes it",
        diagnosis=("optimizer:lr_once",)),
    Bug("optimizer", "decays_without_grad", "training.py", LOOP + "\n                " + DECAY,
        LOOP.replace("            for p in group[\"params\"]:\n", "            for p in group[\"params\"]:\n                " + DECAY + "\n"),
        "decays every parameter of the group, also those that have no gradient this step",
        diagnosis=("optimizer:decay_without_grad",)),
    Bug("optimizer", "no_state", "training.py", "if not state:",
        "if True:",
        "starts m and v afresh at every step",
        diagnosis=("optimizer:no_state",)),
    Bug("optimizer", "step_from_zero", "training.py", 'state["step"] = 0\n',
        'state["step"] = -1\n',
        "counts steps from 0, so the first bias correction divides by zero",
        diagnosis=("optimizer:step_from_zero",)),
    Bug("optimizer", "v_of_g_not_g_squared", "training.py", "v.mul_(b2).addcmul_(g, g, value=1 - b2)",
        "v.mul_(b2).add_(g, alpha=1 - b2)",
        "averages the gradient instead of its square in v",
        diagnosis=("optimizer:v_of_g",)),
    Bug("optimizer", "closure_ignored", "training.py", "            with torch.enable_grad():\n                loss = closure()",
        "            loss = None",
        "never calls the closure",
        diagnosis=("optimizer:closure_not_called",)),
    Bug("optimizer", "no_value_checks", "training.py", "if not all(0.0 <= b < 1.0 for b in betas):",
        "if not all(0.0 <= b <= 1.0 for b in betas):",
        "accepts a beta of 1",
        named_by="expected a ValueError"),
    Bug("optimizer", "clip_per_parameter", "training.py", COEF + "\n    for g in grads:\n        g.mul_(coef.to(g.dtype))",
        "for g in grads:\n        g.mul_(torch.clamp(max_norm / (g.norm() + 1e-6), max=1.0))",
        "clips each gradient by its own norm instead of the global one",
        diagnosis=("optimizer:clipped_one_by_one",)),
    Bug("optimizer", "clip_without_1e6", "training.py", COEF,
        "coef = torch.clamp(max_norm / norm, max=1.0)",
        "leaves out torch's 1e-6 in the clipping factor",
        diagnosis=("optimizer:factor_without_1e-6",)),
    Bug("optimizer", "clip_always_scales", "training.py", COEF,
        "coef = max_norm / (norm + 1e-6)",
        "scales the gradients up as well when the norm is below max_norm",
        diagnosis=("optimizer:always_scaled",)),
    Bug("optimizer", "returns_clipped_norm", "training.py", "    return norm\n",
        "    return torch.clamp(norm, max=max_norm)\n",
        "returns the norm after clipping",
        diagnosis=("optimizer:norm_after_clipping",)),
    Bug("optimizer", "generator_read_twice", "training.py", CLIP,
        "norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in parameters\n"
        "                                                 if p.grad is not None]))\n"
        "    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)\n"
        "    for p in parameters:\n"
        "        if p.grad is not None:\n"
        "            p.grad.mul_(coef.to(p.grad.dtype))",
        "goes through the parameters twice, so a generator is empty the second time and nothing is clipped",
        diagnosis=("optimizer:gradients_unchanged",)),
    Bug("optimizer", "norm_is_sum_of_norms", "training.py", NORM,
        "norm = torch.stack([torch.linalg.vector_norm(g) for g in grads]).sum()",
        "adds up the per-parameter norms instead of taking the norm of all gradients",
        diagnosis=("optimizer:sum_of_norms",)),
]

# Families of the bugs above, first written as unseen bugs to measure the diagnoses on (2026-12-01).
BUGS += [
    Bug("optimizer", "m_without_one_minus_b1", "training.py", "m.mul_(b1).add_(g, alpha=1 - b1)",
        "m.mul_(b1).add_(g)",
        "adds the whole gradient to m, forgetting the (1 - b1) factor",
        diagnosis=("optimizer:m_without_1_minus_b1",)),
]

# Members of the fitted bias-step family (mistakes.BIAS_STEPS) that no single entry names.
BUGS += [
    Bug("optimizer", "step_counter_starts_at_one", "training.py", 'state["step"] = 0\n', 'state["step"] = 1\n',
        "starts the step counter at 1 and increments it before the first update, so t is one ahead",
        diagnosis=("optimizer:bias_steps",)),
    Bug("optimizer", "v_correction_one_step_ahead", "training.py",
        "denom = (v / (1 - b2**t)).sqrt_().add_(eps)", "denom = (v / (1 - b2**(t + 1))).sqrt_().add_(eps)",
        "corrects v with the next step's 1 - b2**(t + 1)",
        diagnosis=("optimizer:bias_steps",)),
]

# A bias correction with the other beta, or none (mistakes.BIAS_BETAS): held-out set 8's v_correction_uses_b1 and
# its siblings.
DENOM = "denom = (v / (1 - b2**t)).sqrt_().add_(eps)"
STEP = "p.addcdiv_(m, denom, value=-lr / (1 - b1**t))"
BUGS += [
    Bug("optimizer", "v_correction_uses_b1", "training.py", DENOM, "denom = (v / (1 - b1**t)).sqrt_().add_(eps)",
        "the second moment's bias correction uses b1 instead of b2", diagnosis=("optimizer:bias_betas",)),
    Bug("optimizer", "m_correction_uses_b2", "training.py", STEP, "p.addcdiv_(m, denom, value=-lr / (1 - b2**t))",
        "the first moment's bias correction uses b2 instead of b1", diagnosis=("optimizer:bias_betas",)),
    Bug("optimizer", "v_not_corrected", "training.py", DENOM, "denom = v.sqrt().add_(eps)",
        "corrects m's bias but not v's", diagnosis=("optimizer:bias_betas",)),
    Bug("optimizer", "m_not_corrected", "training.py", STEP, "p.addcdiv_(m, denom, value=-lr)",
        "corrects v's bias but not m's", diagnosis=("optimizer:bias_betas",)),
]

# The per-parameter norms reduced another way than the L2 norm of them all (mistakes.CLIP_NORM_MISTAKES).
NORM = "norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))"
BUGS += [
    Bug("optimizer", "clip_largest_norm", "training.py", NORM,
        "norm = torch.stack([torch.linalg.vector_norm(g) for g in grads]).max()",
        "takes the largest per-parameter norm (an infinity norm) as the total norm",
        diagnosis=("optimizer:largest_norm",)),
    Bug("optimizer", "clip_mean_of_norms", "training.py", NORM,
        "norm = torch.stack([torch.linalg.vector_norm(g) for g in grads]).mean()",
        "averages the per-parameter norms", diagnosis=("optimizer:mean_of_norms",)),
    Bug("optimizer", "v_without_one_minus_b2", "training.py", "v.mul_(b2).addcmul_(g, g, value=1 - b2)",
        "v.mul_(b2).addcmul_(g, g)",
        "adds the whole squared gradient to v, forgetting the (1 - b2) factor",
        diagnosis=("optimizer:v_without_1_minus_b2",)),
    Bug("optimizer", "m_betas_swapped", "training.py", M,
        "m.mul_(1 - b1).add_(g, alpha=b1)",
        "swaps b1 and 1 - b1 in the first moment's update",
        diagnosis=("optimizer:moment_weights_swapped",)),
    Bug("optimizer", "v_betas_swapped", "training.py", "v.mul_(b2).addcmul_(g, g, value=1 - b2)",
        "v.mul_(1 - b2).addcmul_(g, g, value=b2)",
        "swaps b2 and 1 - b2 in the second moment's update",
        diagnosis=("optimizer:moment_weights_swapped",)),
    Bug("optimizer", "clip_squared_norm", "training.py", NORM,
        "norm = torch.stack([g.pow(2).sum() for g in grads]).sum()",
        "sums the squared gradients and forgets the square root",
        diagnosis=("optimizer:squared_norm",)),
    Bug("optimizer", "clip_l1_norm", "training.py", NORM,
        "norm = torch.stack([g.abs().sum() for g in grads]).sum()",
        "takes the L1 norm of the gradients instead of the L2 norm",
        diagnosis=("optimizer:norm_order",)),
    Bug("optimizer", "clip_max_abs_norm", "training.py", NORM,
        "norm = torch.stack([g.abs().max() for g in grads]).max()",
        "takes the largest absolute gradient entry as the norm",
        diagnosis=("optimizer:norm_order",)),
    Bug("optimizer", "both_moments_swapped", "training.py", M + "\n                v.mul_(b2).addcmul_(g, g, value=1 - b2)",
        "m.mul_(1 - b1).add_(g, alpha=b1)\n                v.mul_(1 - b2).addcmul_(g, g, value=b2)",
        "swaps each beta with one minus it in both moments' updates",
        diagnosis=("optimizer:moment_weights_swapped",)),
    # Held-out set 14's moments_aliased.
    Bug("optimizer", "moments_aliased", "training.py",
        '                    state["m"] = torch.zeros_like(p)\n                    state["v"] = torch.zeros_like(p)',
        '                    state["m"] = state["v"] = torch.zeros_like(p)',
        "creates m and v with one chained assignment, so they are one tensor",
        diagnosis=("optimizer:moments_aliased",)),
]
