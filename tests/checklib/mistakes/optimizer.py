"""The known mistakes of `optimizer` (AdamW and gradient clipping): its entries, simulators and bundles (see
`checklib/mistakes/__init__.py`)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import Tensor

from ..catalogue import Mistakes, bind, mistake, recognised, simulated, variants
from .general import besides, plus


STEP_FROM_ZERO = recognised("optimizer", "step_from_zero",
                            "your step counts the steps from 0 at the first update, so the bias correction 1 - b1**t "
                            "is 0 and divides by zero: count the update first (t = 1 at a parameter's first update)")
ADAMW_MISTAKES = variants("optimizer", {
    "your bias correction uses one step counter for all the parameters: t counts each parameter's own "
    "updates (a parameter without a gradient is not updated, and its t does not move)": "global_step",
    "your weight decay goes into the gradient (Adam with L2, g + wd * p): AdamW decays the parameter "
    "itself, p *= 1 - lr * wd, outside m and v": "l2",
    "you decay the parameter after the Adam update instead of before it: p *= 1 - lr * wd comes first":
        "decay_after",
    "your decay is p *= 1 - wd, without the learning rate: AdamW's is p *= 1 - lr * wd": "decay_without_lr",
    "your eps is inside the square root (sqrt(v_hat + eps)); AdamW adds it after: sqrt(v_hat) + eps":
        "eps_inside",
    "your first moment m uses beta2: m = b1 * m + (1 - b1) * g, only v uses b2": "b2_for_m",
    "your first moment adds the whole gradient, m = b1 * m + g: it is a running average, "
    "m = b1 * m + (1 - b1) * g": "m_without_1_minus_b1",
    "your second moment adds the whole squared gradient, v = b2 * v + g**2: it is a running average, "
    "v = b2 * v + (1 - b2) * g**2": "v_without_1_minus_b2",
    "your betas are swapped (m uses beta2, v beta1): m = b1 * m + (1 - b1) * g, v = b2 * v + (1 - b2) * g**2":
        "betas_swapped",
    "your v averages g, not g**2 (v = b2 * v + (1 - b2) * g * g), so its square root is NaN where v < 0":
        "v_of_g",
    "your update has no bias correction: divide m by 1 - b1**t and v by 1 - b2**t": "no_bias_correction",
    "your v is divided by 1 - b2**t after its square root: the square root is of v / (1 - b2**t)":
        "v_correction_outside_sqrt",
    "your optimizer reads lr once, at construction: read group['lr'] at every step, a schedule changes it":
        "lr_once",
    "you decay every parameter at every step, also those without a gradient: skip them entirely":
        "decay_without_grad",
    "your state (m, v and the step count) starts afresh at every step: create it only on a parameter's "
    "first update and keep it in self.state[p]": "no_state",
    "your update uses the gradient instead of m (no first moment)": "no_momentum",
    "your m and v are one tensor (state['m'] = state['v'] = torch.zeros_like(p) gives one tensor two names), so "
    "each in-place update of one changes the other: create each with its own torch.zeros_like(p)":
        "moments_aliased",
})


CLOSURE_NOT_CALLED = mistake("optimizer", "closure_not_called",
                             "your step never calls the closure: it computes this step's gradients "
                             "(and the loss to return), so call it first", lambda: 0)


def closure_mistakes() -> Mistakes:
    """For how many times step(closure) ran the closure."""
    return bind([CLOSURE_NOT_CALLED])


def adamw_run(values: list[Tensor], grads: list[list[Tensor | None]], groups: list[dict], lrs: list[list[float]],
              variant: str = "", bias_steps: tuple[int, int] = (0, 0),
              corrections: tuple[str, str] = ("b1", "b2"), swapped: tuple[bool, bool] = (False, False)
              ) -> list[list[Tensor]]:
    """Every step's parameters (float64) of the contract's AdamW, with the mistake `variant` switched on, or
    the bias corrections 1 - c1**(t + k1), 1 - c2**(t + k2) of `bias_steps` (k1, k2) and `corrections` (c1, c2:
    "b1", "b2", or "none", no correction), or with the weights of m's and/or v's average swapped (`swapped`:
    m = (1 - b1) * m + b1 * g).

    `groups[i]` holds parameter i's settings (lr, betas, eps, weight_decay) at construction; `lrs[s][i]` is
    its lr at step s; `grads[s][i]` its gradient at step s, or None.
    """
    p = [v.double().clone() for v in values]
    m = [torch.zeros_like(x) for x in p]
    v = [torch.zeros_like(x) for x in p]
    own = [0] * len(p)
    history = []
    for step, step_grads in enumerate(grads, start=1):
        for i, g in enumerate(step_grads):
            settings = groups[i]
            lr = settings["lr"] if variant == "lr_once" else lrs[step - 1][i]
            (b1, b2), eps, wd = settings["betas"], settings["eps"], settings["weight_decay"]
            if g is None:
                if variant == "decay_without_grad":
                    p[i] *= 1 - lr * wd
                continue
            g = g.double()
            own[i] += 1
            t = step if variant == "global_step" else own[i]
            if variant == "betas_swapped":
                b1, b2 = b2, b1
            m_beta = b2 if variant == "b2_for_m" else b1
            if variant == "l2":
                g = g + wd * p[i]
            elif variant == "decay_without_lr":
                p[i] *= 1 - wd
            elif variant != "decay_after":
                p[i] *= 1 - lr * wd
            if variant == "no_state":
                m[i], v[i], t = torch.zeros_like(p[i]), torch.zeros_like(p[i]), 1
            m_keep, m_new = m_beta, (1.0 if variant == "m_without_1_minus_b1" else 1 - m_beta)
            v_keep, v_new = b2, (1.0 if variant == "v_without_1_minus_b2" else 1 - b2)
            if swapped[0]:
                m_keep, m_new = m_new, m_keep
            if swapped[1]:
                v_keep, v_new = v_new, v_keep
            m[i] = m_keep * m[i] + m_new * g
            if variant == "moments_aliased":  # one tensor: updated in place as m, then again as v
                m[i] = v[i] = v_keep * m[i] + v_new * g * g
            else:
                v[i] = v_keep * v[i] + v_new * (g if variant == "v_of_g" else g * g)
            betas = {"b1": b1, "b2": b2, "none": 0.0}
            c1, c2 = (1.0, 1.0) if variant == "no_bias_correction" else (
                1 - betas[corrections[0]]**(t + bias_steps[0]), 1 - betas[corrections[1]]**(t + bias_steps[1]))
            num = g if variant == "no_momentum" else m[i] / c1
            if variant == "eps_inside":
                denom = (v[i] / c2 + eps).sqrt()
            elif variant == "v_correction_outside_sqrt":
                denom = v[i].sqrt() / c2 + eps
            else:
                denom = (v[i] / c2).sqrt() + eps
            p[i] = p[i] - lr * num / denom
            if variant == "decay_after":
                p[i] *= 1 - lr * wd
        history.append([x.clone() for x in p])
    return history


# A family: the step of either bias correction shifted (t - 1, t + 1), each pair its own sentence.
BIAS_STEPS = mistake(
    "optimizer", "bias_steps",
    "your bias corrections are 1 - b1**({t1}) and 1 - b2**({t2}): both use t, the parameter's own update "
    "count, which is 1 at its first update (state['step'] += 1 before it is used)", dict())
BIAS_SHIFTS = [(k1, k2) for k1 in (-1, 0, 1) for k2 in (-1, 0, 1) if (k1, k2) != (0, 0)]
# A family: either correction with the other beta, or none (both none is no_bias_correction).
BIAS_BETAS = mistake(
    "optimizer", "bias_betas",
    "your bias corrections are {c1} for m and {c2} for v: m is divided by 1 - b1**t and v by 1 - b2**t, "
    "each moment by its own beta", dict())
BIAS_BETA_PAIRS = [(c1, c2) for c1 in ("b1", "b2", "none") for c2 in ("b1", "b2", "none")
                   if (c1, c2) not in (("b1", "b2"), ("none", "none"))]


# A family: the weights of a moment's running average swapped, (1 - b) * m + b * g, in m, v or both.
MOMENT_WEIGHTS_SWAPPED = mistake(
    "optimizer", "moment_weights_swapped",
    "your moment update ({moments}) swaps the weights of its running average, {wrong}: the old value keeps the beta, "
    "m = b1 * m + (1 - b1) * g and v = b2 * v + (1 - b2) * g**2", dict())
MOMENT_SWAPS = {
    (True, False): ("m", "m = (1 - b1) * m + b1 * g"),
    (False, True): ("v", "v = (1 - b2) * v + b2 * g**2"),
    (True, True): ("m, v", "m = (1 - b1) * m + b1 * g, v = (1 - b2) * v + b2 * g**2"),
}


def _correction(beta: str) -> str:
    return "1" if beta == "none" else f"1 - {beta}**t"


def _adamw_mistakes(values, grads, groups, lrs, pick: Callable[[list[list[Tensor]]], Any], got: Any) -> Mistakes:
    """ADAMW_MISTAKES and the BIAS_SHIFTS family, each model `pick(run)` of the run it gives (which came back
    as `got`); each run computed once, when a check fails."""
    cache: dict[Any, Any] = {}

    def model(variant="", bias_steps=(0, 0), corrections=("b1", "b2"), swapped=(False, False)):
        key = variant, bias_steps, corrections, swapped
        if key not in cache:
            cache[key] = pick(adamw_run(values, grads, groups, lrs, variant, bias_steps, corrections, swapped))
        return cache[key]

    family = {BIAS_STEPS.text(t1=plus("t", k1), t2=plus("t", k2)): (lambda k=(k1, k2): model(bias_steps=k))
              for k1, k2 in BIAS_SHIFTS}
    family.update({BIAS_BETAS.text(c1=_correction(c1), c2=_correction(c2)): (lambda c=(c1, c2): model(corrections=c))
                   for c1, c2 in BIAS_BETA_PAIRS})
    family.update({MOMENT_WEIGHTS_SWAPPED.text(moments=moments, wrong=wrong): (lambda w=w: model(swapped=w))
                   for w, (moments, wrong) in MOMENT_SWAPS.items()})
    return besides(simulated(ADAMW_MISTAKES, model), family, got)


def adamw_run_mistakes(values, grads, groups, lrs, got: Any = None) -> Mistakes:
    """For a whole run, which came back as `got`: every step's parameters, flattened in order (see
    `flat_run`). One step alone may not tell two mistakes apart (with betas (0.9, 0.99) an m without
    (1 - b1) and a v without its bias correction both scale the first step by 10); the run does."""
    return _adamw_mistakes(values, grads, groups, lrs, flat_run, got)


def flat_run(steps: list[list[Any]]) -> Tensor | None:
    """Every step's parameters in one float64 vector; None where a step holds something else than tensors."""
    if not all(isinstance(t, Tensor) and t.is_floating_point() for step in steps for t in step):
        return None
    return torch.cat([t.detach().double().flatten() for step in steps for t in step])


def adamw_mistakes(values, grads, groups, lrs, step: int, index: int, got: Any = None) -> Mistakes:
    """For parameter `index` after step `step` (from 0), which came back as `got`."""
    return _adamw_mistakes(values, grads, groups, lrs, lambda run: run[step][index], got)


def _norm(grads: list[Tensor]) -> Tensor:
    return torch.stack([g.double().norm() for g in grads]).norm()


CLIP_NORM_MISTAKES = (
    mistake("optimizer", "norm_after_clipping",
            "you returned the norm after clipping: return the total norm the gradients had before",
            lambda grads, max_norm, norm: torch.clamp(norm, max=max_norm)),
    mistake("optimizer", "squared_norm", "you returned the squared norm (the sum of squares, without its square root)",
            lambda grads, max_norm, norm: norm**2),
    mistake("optimizer", "sum_of_norms",
            "you returned the sum of the per-parameter norms, not the norm of all the gradients together "
            "(sqrt of the sum of every squared entry)", lambda grads, max_norm, norm: sum(g.double().norm() for g in grads)),
    mistake("optimizer", "last_norm_only",
            "you returned the last parameter's norm only: the norm is over all the gradients together",
            lambda grads, max_norm, norm: grads[-1].double().norm()),
    mistake("optimizer", "largest_norm",
            "you returned the largest of the per-parameter norms (an infinity norm over them): the norm is the L2 "
            "norm of all the gradients together, the square root of the sum of every squared entry",
            lambda grads, max_norm, norm: torch.stack([g.double().norm() for g in grads]).max()),
    mistake("optimizer", "mean_of_norms",
            "you returned the mean of the per-parameter norms: the norm is the L2 norm of all the gradients "
            "together, the square root of the sum of every squared entry",
            lambda grads, max_norm, norm: torch.stack([g.double().norm() for g in grads]).mean()),
)
CLIP_GRADS_MISTAKES = (
    mistake("optimizer", "gradients_unchanged",
            "the gradients were not changed: clip_grad_norm scales every .grad in place (and a generator of "
            "parameters can be read only once: make a list first)",
            lambda g, max_norm, norm: g if norm > max_norm else None),
    mistake("optimizer", "clipped_one_by_one",
            "you clipped each gradient by its own norm: the norm is one, of all the gradients together",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / (g.norm() + 1e-6), max=1.0)),
    mistake("optimizer", "always_scaled",
            "you always scale by max_norm / norm, also when the norm is already below max_norm: the factor is "
            "min(1, max_norm / (norm + 1e-6))", lambda g, max_norm, norm: g * max_norm / (norm + 1e-6)),
    mistake("optimizer", "factor_without_1e-6",
            "your factor is max_norm / norm without the + 1e-6 (torch adds it to the norm)",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / norm, max=1.0)),
    mistake("optimizer", "factor_inverted", "your factor is norm / max_norm, the wrong way round",
            lambda g, max_norm, norm: g * torch.clamp(norm / max_norm, max=1.0)),
    mistake("optimizer", "factor_of_squared_norm", "your factor uses the squared norm (no square root)",
            lambda g, max_norm, norm: g * torch.clamp(max_norm / (norm**2 + 1e-6), max=1.0)),
)


# A family of both clip checks: the total norm of another order than 2 (the sum of absolute values, the
# largest absolute value), returned and used for the factor alike.
CLIP_NORM_ORDER = mistake(
    "optimizer", "norm_order",
    "your total norm is of order {ord} (torch.linalg.vector_norm(..., ord={ord}) over every entry): "
    "clip_grad_norm's is the L2 norm, the square root of the sum of every squared entry",
    lambda grads, max_norm, index, order: _ordered_clip(grads, max_norm, index, order))
CLIP_NORM_ORDERS = (1, "inf")


def _ordered_clip(grads: list[Tensor], max_norm: float, index: int | None, order: Any) -> Tensor:
    """The norm of that order (index None), or gradient `index` clipped by it."""
    flat = torch.cat([g.double().flatten() for g in grads])
    norm = torch.linalg.vector_norm(flat, ord=math.inf if order == "inf" else order)
    if index is None:
        return norm
    return grads[index].double() * torch.clamp(max_norm / (norm + 1e-6), max=1.0)


def _norm_orders(grads: list[Tensor], max_norm: float, index: int | None) -> Mistakes:
    return {CLIP_NORM_ORDER.text(ord=order): CLIP_NORM_ORDER.on(grads, max_norm, index, order)
            for order in CLIP_NORM_ORDERS}


def clip_norm_mistakes(grads: list[Tensor], max_norm: float) -> Mistakes:
    """For the norm clip_grad_norm returns; also the CLIP_NORM_ORDER family."""
    return besides(bind(CLIP_NORM_MISTAKES, grads, max_norm, _norm(grads)), _norm_orders(grads, max_norm, None))


def clip_grads_mistakes(grads: list[Tensor], max_norm: float, index: int) -> Mistakes:
    """For gradient `index` after clip_grad_norm(parameters, max_norm); also the CLIP_NORM_ORDER family."""
    return besides(bind(CLIP_GRADS_MISTAKES, grads[index].double(), max_norm, _norm(grads)),
                   _norm_orders(grads, max_norm, index))
