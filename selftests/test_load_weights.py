"""A check's weights reach a module as `load_state_dict(state, strict=False)` puts them there, also where the
executor copies them in itself (grader/sandbox/executor.py's `_copied_into_parameters`)."""
from __future__ import annotations

import torch
from torch import nn

from grader.sandbox.executor import _copied_into_parameters


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(5, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4))
        self.head = nn.Linear(4, 5, bias=False)
        self.head.weight = self.emb.weight  # one tensor under two names
        self.register_buffer("scale", torch.ones(4))


def weights(module: nn.Module, seed: int, names=None) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {n: torch.randn(p.shape, generator=gen, dtype=torch.float64) for n, p in
            module.named_parameters(remove_duplicate=False) if names is None or n in names}


def test_copying_in_equals_load_state_dict():
    fast, plain = Tied(), Tied()
    plain.load_state_dict(fast.state_dict())
    for state in (weights(fast, 0), weights(fast, 1, {"block.0.weight", "block.1.bias"})):
        assert _copied_into_parameters(fast, state)
        plain.load_state_dict(state, strict=False)
        assert all(torch.equal(a, b) for a, b in zip(fast.state_dict().values(), plain.state_dict().values()))


def test_anything_more_is_left_to_load_state_dict():
    module = Tied()
    before = {n: t.clone() for n, t in module.state_dict().items()}
    bad_shape = {**weights(module, 2), "block.0.weight": torch.zeros(3, 3)}
    not_a_parameter = {**weights(module, 3), "scale": torch.zeros(4)}
    unknown = {**weights(module, 4), "blocks.0.weight": torch.zeros(4, 4)}
    for state in (bad_shape, not_a_parameter, unknown):
        assert not _copied_into_parameters(module, state)
    hooked = Tied()
    hooked.block[1].register_load_state_dict_post_hook(lambda module, keys: None)

    class OwnLoading(nn.Linear):
        def _load_from_state_dict(self, *args, **kwargs):
            super()._load_from_state_dict(*args, **kwargs)

    own = Tied()
    own.block[0] = OwnLoading(4, 4)
    assert not _copied_into_parameters(hooked, weights(hooked, 5))
    assert not _copied_into_parameters(own, weights(own, 6))
    assert not _copied_into_parameters(lambda x: x, {})
    assert all(torch.equal(before[n], t) for n, t in module.state_dict().items())  # (nothing changed)
