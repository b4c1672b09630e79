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


def warm_kernels() -> None:
    """Run each kind of operation the checks and a Transformer use once, on tiny tensors.

    torch sets much up on an operation's first call (its dispatch, autograd's
    nodes, lazily imported Python); done here, before workers are forked,
    every worker inherits it instead of paying for it again. No global state
    a check can see changes: inputs come from a generator of their own, no
    module is initialised (that would draw from the global generator).
    One thread only, as everywhere in the grader: a process forked after
    torch's thread pool started would wait on the pool's threads forever.
    """
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)

    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.float64):
        x = torch.randn(2, 3, 4, generator=gen, dtype=dtype, requires_grad=True)
        w = torch.randn(12, 4, generator=gen, dtype=dtype, requires_grad=True)
        b = torch.zeros(12, dtype=dtype, requires_grad=True)
        q, k, v = F.linear(x, w, b).split(4, dim=-1)
        q4, k4, v4 = (t.reshape(2, 3, 2, 2).transpose(1, 2).contiguous() for t in (q, k, v))
        mask = torch.ones(3, 3, dtype=torch.bool).tril()
        scores = (q4 @ k4.transpose(-2, -1)) / 2 ** 0.5
        scores = scores.masked_fill(~mask, float("-inf")) + torch.where(mask, 0.0, -1e9).to(dtype)
        attn = torch.softmax(scores, dim=-1) @ v4 + torch.einsum("bhqk,bhkd->bhqd", F.softmax(scores, -1), v4)
        out = attn.transpose(1, 2).reshape(2, 3, 4) + F.scaled_dot_product_attention(q4, k4, v4, is_causal=True)\
            .permute(0, 2, 1, 3).flatten(2)
        out = F.layer_norm(out, (4,)) + F.gelu(out) + F.silu(out) * torch.relu(out) + torch.tanh(out)
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + 1e-6) + out.var(-1, unbiased=False, keepdim=True)
        out = torch.cat([out, torch.stack([x.sum(0), x.max(0).values]).sum(0, keepdim=True)], 0).roll(1, 1)
        logits = out.flatten(0, 1)
        loss = F.cross_entropy(logits, torch.zeros(len(logits), dtype=torch.long)) - F.log_softmax(logits, -1).mean()
        loss = loss + torch.bmm(x, x.transpose(1, 2)).sum() + F.conv2d(x.unsqueeze(1), w.view(12, 1, 2, 2)).sum()
        loss.backward()
        optimizer = torch.optim.AdamW([w, b], lr=1e-3)
        torch.nn.utils.clip_grad_norm_([w, b], 1.0)
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            angles = torch.arange(0, 4, 2, dtype=dtype) * (-torch.log(torch.tensor(10000.0, dtype=dtype)) / 4)
            torch.sin(angles.exp()), torch.cos(angles), torch.polar(angles.abs(), angles)
            probs = torch.softmax(logits, -1)
            torch.multinomial(probs, 1, generator=gen), probs.topk(2), probs.sort(descending=True)[0].cumsum(-1)
            torch.allclose(probs, probs), torch.isclose(probs, probs).all(), torch.isfinite(probs).all()
            x.unfold(1, 2, 1).repeat_interleave(2, dim=1).expand(2, -1, -1, -1).gather(0, torch.zeros(1, 4, 2, 2, dtype=torch.long))
            torch.embedding(w, torch.arange(3)).argmax(-1), torch.triu(mask, 1), torch.full((2,), 1.0).chunk(2)
