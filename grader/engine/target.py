"""The only way checks touch student code: a black box spoken to in plain data.

Checks hold a `Target` and call functions and objects of the implementation
through it (`target.fn("attention.split_heads")(x, 2)`). Behind it is an
executor: the worker's, across the process boundary (grader/sandbox/handle.py),
or one in this process (`open_target`, for plain pytest).
"""
from __future__ import annotations

from collections import deque
from pathlib import Path
from typing import Any, Protocol

import torch

from ..sandbox import standins
from ..sandbox.executor import Executor
from ..sandbox.protocol import StudentError
from ..sandbox.wire import Ref


class _Executor(Protocol):
    def run(self, op: str, **request: Any) -> Any: ...
    def run_ahead(self, op: str, **request: Any) -> None: ...
    def close(self) -> None: ...


class Target:
    """The checks' handle on an implementation: `target.fn("attention.split_heads")(x, 2)`."""

    def __init__(self, executor: _Executor) -> None:
        self._executor = executor
        # What student code made or was handed lately (held, so that identity tells them apart): the tensors its
        # calls returned, and the objects passed as arguments of a call. An error of a request that reaches one
        # of them is marked `made_by_student`: its inputs are not only the check's own.
        self._returned: deque = deque(maxlen=256)
        self._handed: deque = deque(maxlen=256)

    def request(self, op: str, **request: Any) -> Any:
        try:
            result = self._executor.run(op, **request)
        except StudentError as exc:
            exc.made_by_student = self._reaches_student_values(op, request)
            raise
        finally:
            self._handed.extend(_leaves((request.get("args"), request.get("kwargs"), request.get("calls")), Ref))
        self._returned.extend(_leaves(result, torch.Tensor))
        return result

    def _reaches_student_values(self, op: str, request: dict) -> bool:
        """Whether a request's arguments hold a tensor that student code returned, or it calls a method of an
        object that was handed to student code before (a cache that a forward filled)."""
        inputs = (request.get("args"), request.get("kwargs"), request.get("calls"))
        if any(any(t is r for r in self._returned) for t in _leaves(inputs, torch.Tensor)):
            return True
        receiver = request.get("ref")
        return op == "method" and any(receiver is h for h in self._handed)

    def request_ahead(self, op: str, **request: Any) -> None:
        """A request whose result is not needed: across a process boundary it does not wait for the
        answer, and an error in it is raised by the next request instead."""
        self._executor.run_ahead(op, **request)

    def fn(self, name: str) -> "RemoteFunction":
        return RemoteFunction(self, name)

    def new(self, name: str, *args: Any, **kwargs: Any) -> "RemoteObject":
        return RemoteObject(self, self.request("new", name=name, args=args, kwargs=kwargs))

    def new_trusted(self, name: str, *args: Any, **kwargs: Any) -> "RemoteObject":
        """A grader stand-in (e.g. `RecordingKVCache`) created on the implementation's side."""
        return RemoteObject(self, self.request("new", name=name, args=args, kwargs=kwargs, trusted=True))

    def close(self) -> None:
        self._executor.close()


def _leaves(value: Any, kind: type) -> list:
    """The values of type `kind` in nested lists, tuples and dicts."""
    if isinstance(value, kind):
        return [value]
    if isinstance(value, (list, tuple)):
        return [leaf for v in value for leaf in _leaves(v, kind)]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v, kind)]
    return []


def _unwrap(value: Any) -> Any:
    if isinstance(value, RemoteObject):
        return value.ref
    if isinstance(value, (list, tuple)):
        return type(value)(_unwrap(v) for v in value)
    if isinstance(value, dict):
        return {k: _unwrap(v) for k, v in value.items()}
    return value


class RemoteFunction:
    def __init__(self, target: Target, name: str) -> None:
        self.target, self.name = target, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.target.request("call", name=self.name, args=_unwrap(args), kwargs=_unwrap(kwargs)))

    def map(self, calls: list[tuple]) -> list[Any]:
        """Call once per tuple of positional arguments, in one round trip; the results in order."""
        return [self._wrap(r) for r in self.target.request("call_many", name=self.name, calls=[_unwrap(a) for a in calls])]

    def call_returning_args(self, *args: Any, **kwargs: Any) -> tuple[Any, tuple]:
        """The result, and the positional arguments as they were after the call."""
        result, after = self.target.request(
            "call", name=self.name, args=_unwrap(args), kwargs=_unwrap(kwargs), return_args=True
        )
        return self._wrap(result), after

    def with_default_device(self, default_device: str, /, *args: Any, **kwargs: Any) -> Any:
        """Call with torch's default device (where tensors made without `device=` land) set."""
        return self._wrap(self.target.request("call", name=self.name, args=_unwrap(args), kwargs=_unwrap(kwargs),
                                              default_device=default_device))

    def grad(self, *args: Any, grad_output: torch.Tensor, output_index: int | None = None, **kwargs: Any) -> dict:
        """Gradients of `sum(output * grad_output)` w.r.t. the tensor arguments (and parameters)."""
        return self.target.request(
            "grad", name=self.name, args=_unwrap(args), kwargs=_unwrap(kwargs),
            grad_output=grad_output, output_index=output_index,
        )

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, Ref):
            return RemoteObject(self.target, value)
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value


class RemoteObject(RemoteFunction):
    """An object on the implementation's side; calling it calls the object."""

    def __init__(self, target: Target, ref: Ref) -> None:
        super().__init__(target, ref)  # type: ignore[arg-type]
        self.ref = ref

    @property
    def type_name(self) -> str:
        return self.ref.type_name

    def __repr__(self) -> str:  # as a failure message shows what came back: the student's type, not ours
        return f"<{self.ref.type_name} object>"

    def method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._wrap(self.target.request("method", ref=self.ref, name=name, args=_unwrap(args), kwargs=_unwrap(kwargs)))

    def attr(self, name: str) -> Any:
        return self._wrap(self.target.request("getattr", ref=self.ref, name=name))

    def tensor_info(self, name: str) -> dict:
        """{"type", "requires_grad", "has_grad_fn"} of the attribute `name` (the last two None if not a tensor)."""
        return self.target.request("tensor_info", ref=self.ref, name=name)

    def load_weights(self, state: dict[str, torch.Tensor]) -> None:
        """Copy the given parameters in (other parameters of the module are left alone)."""
        self.target.request_ahead("load_weights", ref=self.ref, state=state)

    def forward_kept(self, *args: Any, **kwargs: Any) -> Any:
        """Call the module and have its graph kept on its side for `backward` (the next request)."""
        return self._wrap(self.target.request("forward", name=self.ref, args=_unwrap(args), kwargs=_unwrap(kwargs)))

    def backward(self, grad_output: torch.Tensor) -> dict:
        """{"params": name -> gradient of `sum(output * grad_output)`} through the last `forward_kept`."""
        return self.target.request("backward", grad_output=grad_output)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return self.method("state_dict")

    def train(self, mode: bool = True) -> None:
        self._method_ahead("train", mode)

    def eval(self) -> None:
        self._method_ahead("eval")

    def to(self, dtype: torch.dtype) -> None:
        """Convert the module's parameters in place (Module.to)."""
        self._method_ahead("to", dtype)

    def _method_ahead(self, name: str, *args: Any) -> None:
        """A method whose result is not needed (see Target.request_ahead)."""
        self.target.request_ahead("method", ref=self.ref, name=name, args=args, kwargs={})

    def __len__(self) -> int:
        return self.method("__len__")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args, **kwargs: self.method(name, *args, **kwargs)


def open_target(folder: str | Path, isolate_for: str | None = None, trusted: tuple[str, ...] = ()) -> Target:
    """A target for the implementation in `folder`, isolated for one component's checks (in this process)."""
    return Target(Executor(folder, isolate_for, code=standins.read(standins.available_for(isolate_for, trusted))))
