"""What the grader changes in torch before any worker is forked (one concern: start-up cost)."""
from __future__ import annotations


def optimizers_without_dynamo() -> None:
    """Let torch.optim run without importing torch._dynamo.

    Optimizer methods are wrapped by `torch._disable_dynamo`, whose wrapper
    imports torch._dynamo (and sympy: most of a second, far more on a loaded
    machine) on the first call, only to keep torch.compile out of them. Nothing
    here compiles, so each wrapped function is marked as its own "disabled"
    version, the wrapper's cache, and the import never happens. Likewise each
    `step` is wrapped by `_use_grad_for_differentiable`, which imports
    torch._dynamo for a `graph_break()` that does nothing outside a compiled
    graph: it is replaced by the same grad-mode handling without it.
    """
    import functools

    import torch
    import torch.optim

    classes = [torch.optim.Optimizer, *(v for v in vars(torch.optim).values()
                                        if isinstance(v, type) and issubclass(v, torch.optim.Optimizer))]
    for cls in classes:
        for value in vars(cls).values():
            wrapped = getattr(value, "__wrapped__", None)
            code = getattr(value, "__code__", None)
            if wrapped is not None and code is not None and "__dynamo_disable" in code.co_consts:
                try:
                    setattr(wrapped, "__dynamo_disable", wrapped)
                except (AttributeError, TypeError):
                    pass
        step = vars(cls).get("step")
        inner = getattr(step, "__wrapped__", None)
        if inner is not None and getattr(step, "__code__", None) is not None and step.__code__.co_name == "_use_grad":
            setattr(cls, "step", functools.update_wrapper(_grad_mode_of_differentiable(inner), inner))


def _grad_mode_of_differentiable(step):
    """`step` run with grad mode as the optimizer's `differentiable` default says (torch's `_use_grad`, minus
    its graph breaks)."""
    import torch

    def _use_grad(self, *args, **kwargs):
        previous = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(self.defaults["differentiable"])
            return step(self, *args, **kwargs)
        finally:
            torch.set_grad_enabled(previous)

    return _use_grad
