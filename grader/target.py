"""The only way checks touch student code: a black box spoken to in plain data.

Checks hold a `Target` and call functions and objects of the implementation
through it. What goes in and comes out is plain data (tensors, numbers,
strings, tuples, lists, dicts, None) and opaque references to objects that
live on the implementation's side. Tensors are copied both ways, so a check
never shares memory or objects with student code, and the same checks can run
against an implementation in another process.
"""
from __future__ import annotations

import re
import time
import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from .loader import ImplementationLoadError, Package
from .wire import Ref


class StudentError(Exception):
    """Student code raised; carried as text (type name, message, where, the call that raised).

    Its str() is what a student reads (see `describe`): never a grader module or class name.
    """

    def __init__(self, type_name: str, message: str, where: str = "", kinds: tuple[str, ...] = (),
                 call: str = "") -> None:
        self.type_name, self.message, self.where, self.call = type_name, message, where, call
        self.kinds = kinds or (type_name,)
        super().__init__(self.describe())

    def describe(self) -> str:
        text = f"{self.type_name}: {self.message}" if self.message else self.type_name
        during = f" while running `{self.call}`" if self.call else ""
        return f"your code raised {_public(text)}{during}\n{self.where}".rstrip()


class NotStarted(StudentError):
    """Student code raised NotImplementedError: the exercise has not been started."""

    def describe(self) -> str:
        return f"not started: {_public(self.message) or 'NotImplementedError'}"


class LoadFailed(StudentError):
    """A file of the implementation is missing or failed to import."""

    def describe(self) -> str:
        return _public(self.message)


class StudentTimeout(StudentError):
    """Student code did not finish before the check's deadline."""

    def describe(self) -> str:
        return self.message


class StudentCrash(StudentError):
    """The process running student code died (segfault, os._exit, out of memory)."""

    def describe(self) -> str:
        return self.message


class WeightsMismatch(StudentError):
    """The checks' weights (named by the contract) do not fit the student's module: a KeyError."""

    def describe(self) -> str:
        return self.message


def _public(text: str) -> str:
    """`text` without the name of the package the grader imports the implementation as."""
    return re.sub(r"\b_drills_impl_\d+\.(?:_own_|_trusted_\w+\.)?", "", text)


class BadResult(StudentError):
    """Student code returned something that cannot cross to the grader (not tensors, numbers or strings)."""

    def describe(self) -> str:
        during = f" from `{self.call}`" if self.call else ""
        return f"your code returned something that is not tensors, numbers or strings{during}: {_public(self.message)}"


ERROR_CLASSES = {cls.__name__: cls for cls in (StudentError, LoadFailed, StudentTimeout, StudentCrash,
                                                   WeightsMismatch, BadResult)}
ERROR_CLASSES["not_started"] = NotStarted


class Executor:
    """The implementation's side: runs requests against one loaded package."""

    def __init__(self, folder: str | Path, isolate_for: str | None = None,
                 broken: dict[str, str] | None = None, code: dict[str, object] | None = None) -> None:
        self.package = Package(folder, isolate_for, broken, code)
        self.objects: dict[int, Any] = {}
        self.folder = str(self.package.folder)

    # --- plain data in and out -------------------------------------------------
    def _inbound(self, value: Any) -> Any:
        if isinstance(value, Ref):
            return self.objects[value.id]
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
        if isinstance(value, (list, tuple)):
            return type(value)(self._inbound(v) for v in value)
        if isinstance(value, dict):
            return {k: self._inbound(v) for k, v in value.items()}
        return value

    def _outbound(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return value.detach().as_subclass(torch.Tensor).clone()
        if value is None or isinstance(value, (bool, int, float, str, torch.dtype, torch.device, torch.Size)):
            return value
        if isinstance(value, (list, tuple)):
            items = [self._outbound(v) for v in value]
            return items if isinstance(value, list) else tuple(items)
        if isinstance(value, dict):
            return {str(k): self._outbound(v) for k, v in value.items()}
        return self._store(value)

    def _store(self, obj: Any) -> Ref:
        for ref_id, known in self.objects.items():
            if known is obj:
                return Ref(ref_id, type(obj).__name__)
        ref_id = len(self.objects) + 1
        self.objects[ref_id] = obj
        return Ref(ref_id, type(obj).__name__)

    # --- requests ---------------------------------------------------------------
    def run_ahead(self, op: str, **request: Any) -> None:
        """In the same process nothing is gained by sending ahead: run it now."""
        self.run(op, **request)

    def run(self, op: str, **request: Any) -> Any:
        try:
            return getattr(self, f"_op_{op}")(**request)
        except ImplementationLoadError as exc:
            raise LoadFailed("ImportError", str(exc)) from None
        except StudentError as exc:
            raise exc from None
        except Exception as exc:  # noqa: BLE001 - any failure of student code
            cls = NotStarted if isinstance(exc, NotImplementedError) else StudentError
            kinds = tuple(c.__name__ for c in type(exc).__mro__)
            raise cls(type(exc).__name__, str(exc), self._where(exc), kinds, call_label(op, request)) from None

    def _where(self, exc: BaseException, frames_shown: int = 3) -> str:
        """The student's own frames that led to the error, innermost last (at most `frames_shown`)."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(self.folder)]
        return "\n".join(f'  at {Path(f.filename).name}:{f.lineno} in {f.name}: {(f.line or "").strip()}'
                         for f in frames[-frames_shown:])

    def _op_load(self, module: str):
        self.package.module(module)

    def _op_reset(self):
        self.objects.clear()

    def _callee(self, name: str | Ref):
        """A stored object (a module, a cache) or a name of the implementation ('attention.split_heads')."""
        return self.objects[name.id] if isinstance(name, Ref) else self.package.resolve(name)

    def _op_call(self, name: str | Ref, args=(), kwargs=None, return_args: bool = False,
                 default_device: str | None = None):
        func = self._callee(name)
        args, kwargs = self._inbound(tuple(args)), self._inbound(kwargs or {})
        with torch.device(default_device) if default_device else nullcontext():
            result = func(*args, **kwargs)
        result = self._outbound(result)
        return (result, self._outbound(args)) if return_args else result

    def _op_call_many(self, name: str | Ref, calls=()):
        func = self._callee(name)
        return [self._outbound(func(*self._inbound(tuple(args)))) for args in calls]

    def _op_new(self, name: str, args=(), kwargs=None, trusted: bool = False):
        args, kwargs = self._inbound(tuple(args)), self._inbound(kwargs or {})
        if trusted:
            return self._store(self.package.new_trusted(name, args, kwargs))
        return self._store(self.package.resolve(name)(*args, **kwargs))

    def _op_method(self, ref: Ref, name: str, args=(), kwargs=None):
        obj = self.objects[ref.id]
        return self._outbound(getattr(obj, name)(*self._inbound(tuple(args)), **self._inbound(kwargs or {})))

    def _op_getattr(self, ref: Ref, name: str):
        return self._outbound(getattr(self.objects[ref.id], name))

    def _op_tensor_info(self, ref: Ref, name: str) -> dict:
        """Autograd facts about a stored object's tensor attribute, which a copy of the tensor cannot carry."""
        value = getattr(self.objects[ref.id], name)
        if not isinstance(value, torch.Tensor):
            return {"type": type(value).__name__, "requires_grad": None, "has_grad_fn": None}
        plain = torch.Tensor.as_subclass(value, torch.Tensor)  # a subclass cannot answer for itself
        return {"type": "Tensor", "requires_grad": bool(plain.requires_grad), "has_grad_fn": plain.grad_fn is not None}

    def _op_load_weights(self, ref: Ref, state: dict):
        module = self.objects[ref.id]
        result = module.load_state_dict(self._inbound(state), strict=False)
        if result.unexpected_keys:
            own = sorted(name for name, _ in module.named_parameters())
            raise WeightsMismatch("KeyError", f"the checks load weights by the contract's names into your "
                                  f"{type(module).__name__}, but it has no parameters named "
                                  f"{sorted(result.unexpected_keys)} (its parameters: {own or 'none'})")

    def _op_grad(self, name, args=(), kwargs=None, grad_output=None, output_index: int | None = None):
        """Backpropagate `grad_output` from a call; returns input and parameter gradients."""
        func = self._callee(name)
        args = [self._inbound(a) for a in args]
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.requires_grad_(True)
        params = dict(func.named_parameters()) if isinstance(func, torch.nn.Module) else {}
        for p in params.values():
            p.grad = None
        out = func(*args, **self._inbound(kwargs or {}))
        if output_index is not None:
            out = out[output_index]
        (out * self._inbound(grad_output)).sum().backward()
        return {
            "args": [self._outbound(a.grad) if isinstance(a, torch.Tensor) and a.grad is not None else None for a in args],
            "params": {n: (None if p.grad is None else self._outbound(p.grad)) for n, p in params.items()},
        }

    def close(self) -> None:
        self.objects.clear()
        self.package.close()


class RemoteExecutor:
    """The grader's side of a worker process: same `run` as Executor, across the boundary."""

    def __init__(self, worker, timeout_s: float) -> None:
        self.worker, self.timeout_s = worker, timeout_s
        self.waited = 0.0  # seconds of this check spent waiting for the worker: the student's time, not the checks'

    def run(self, op: str, **request: Any) -> Any:
        from .worker import WorkerDied, WorkerTimeout

        label = self._label(op, request)
        started = time.monotonic()
        try:
            reply = self.worker.request({"op": op, **request}, started + max(self.timeout_s - self.waited, 0.0))
        except WorkerTimeout:
            self.worker.timed_out.add(label)
            raise StudentTimeout("Timeout", f"timed out after {self.timeout_s:g} s in `{label}`") from None
        except WorkerDied as exc:
            raise StudentCrash("Crash", f"{exc} while running `{self.worker.first_ahead or label}`") from None
        finally:
            self.waited += time.monotonic() - started
        earlier = self.worker.earlier_error is not None
        if earlier:  # a request sent ahead failed first
            reply, self.worker.earlier_error = self.worker.earlier_error, None
        if "error" in reply:
            error = reply["error"]
            cls = ERROR_CLASSES.get(error.get("class"), StudentError)
            raise cls(str(error.get("type")), str(error.get("message")), str(error.get("where", "")),
                      tuple(str(k) for k in error.get("kinds", ())), "" if earlier else label)
        return reply.get("ok")

    def run_ahead(self, op: str, **request: Any) -> None:
        """Send a request whose result is not needed without waiting; an error in it is raised by the next `run`."""
        self.worker.send_ahead({"op": op, **request}, self._label(op, request))

    def _label(self, op: str, request: dict) -> str:
        """What the request is reported as; a call that timed out in an earlier check fails at once."""
        label = call_label(op, request)
        if label in self.worker.timed_out:
            raise StudentTimeout("Timeout", f"skipped: `{label}` timed out in an earlier check")
        return label

    def close(self) -> None:
        if self.worker.pid is not None:
            self.worker.forget_ahead()
            self.worker.reset_later()


def call_label(op: str, request: dict) -> str:
    """What a request is reported as: the implementation's name it calls ('attention.split_heads')."""
    name = request.get("name")
    call = "call" if op == "call_many" else op  # the same function either way
    label = name if isinstance(name, str) else f"{name.type_name}.{call}" if isinstance(name, Ref) else op
    if op in ("method", "getattr", "tensor_info", "load_weights") and isinstance(request.get("ref"), Ref):
        label = f"{request['ref'].type_name}.{name or op}"
    return label


class Target:
    """The checks' handle on an implementation: `target.fn("attention.split_heads")(x, 2)`."""

    def __init__(self, executor: Executor | RemoteExecutor) -> None:
        self._executor = executor

    def request(self, op: str, **request: Any) -> Any:
        return self._executor.run(op, **request)

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
    from . import standins

    return Target(Executor(folder, isolate_for, code=standins.read(standins.available_for(isolate_for, trusted))))
