"""What crosses the boundary between the grader and a worker (grader/sandbox/wire.py): tensors of every dtype and
layout arrive with their values, and nothing but plain data is let through."""
from __future__ import annotations

import pickle
from collections import OrderedDict

import pytest
import torch

from grader.sandbox import wire


@pytest.mark.parametrize("dtype", list(wire.DTYPES.values()), ids=list(wire.DTYPES))
def test_a_tensor_arrives_with_its_values_whatever_its_layout(dtype):
    x = (torch.randn(3, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 10).to(dtype)
    for sent in (x, x.t(), x[:, ::2], x[:0], x[1]):
        got = wire.loads(wire.dumps({"ok": (sent, [sent])}))["ok"]
        for arrived in (got[0], got[1][0]):
            assert type(arrived) is torch.Tensor and arrived.dtype == dtype and arrived.shape == sent.shape
            assert torch.equal(arrived, sent) and arrived.is_contiguous()


def test_lazily_conjugated_or_negated_tensors_arrive_as_their_values():
    z = torch.randn(2, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    for sent in (z.conj(), -z, torch._neg_view(z), z.conj().imag):
        arrived = wire.loads(wire.dumps(sent))
        assert not arrived.is_conj() and not arrived.is_neg() and torch.equal(arrived, sent.resolve_conj().resolve_neg())


def test_only_plain_data_is_let_through():
    class Anything:
        pass

    with pytest.raises(wire.WireError):
        wire.dumps(Anything())
    with pytest.raises(wire.WireError):
        wire.loads(pickle.dumps(OrderedDict(a=1)))  # an object of a class: refused by the unpickler
    forged = wire.dumps({"t": torch.ones(2)}).replace(b"float32", b"float64")  # data too short for its dtype
    with pytest.raises(wire.WireError):
        wire.loads(forged)
