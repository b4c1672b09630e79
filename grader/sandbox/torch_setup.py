"""What the grader changes in torch before any worker is forked (one concern: start-up cost)."""
from __future__ import annotations


def optimizers_without_dynamo() -> None:
    """Let torch.optim run without importing torch._dynamo.

    Optimizer methods are wrapped by `torch._disable_dynamo`, whose wrapper
    imports torch._dynamo (and sympy: most of a second, far more on a loaded
    machine) on the first call, only to keep torch.compile out of them. Nothing
    here compiles, so each wrapped function is marked as its own "disabled"
    version, the wrapper's cache, and the import never happens.
    """
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
