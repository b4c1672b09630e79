"""The implementation's side of the boundary: runs the checks' requests against one loaded package.

What goes in and comes out is plain data (tensors, numbers, strings, tuples,
lists, dicts, None) and opaque references (`Ref`) to objects that live here.
Tensors are copied both ways, so a check never shares memory or objects with
student code. In a worker it runs confined (worker.py); in plain pytest, in
the checks' own process (grader/engine/target.py's `open_target`).
"""
from __future__ import annotations

import traceback
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

from ..text import Phrase
from .forbid import Guard
from .loader import ImplementationLoadError, Package
from .protocol import LoadFailed, NotStarted, StudentError, WeightsMismatch, call_label
from .wire import Ref


class Executor:
    """The implementation's side: runs requests against one loaded package."""

    def __init__(self, folder: str | Path, isolate_for: str | None = None,
                 broken: dict[str, str] | None = None, code: dict[str, object] | None = None,
                 copies: bool = True, mates: frozenset[str] = frozenset(), forbidden: tuple[str, ...] = ()) -> None:
        self.package = Package(folder, isolate_for, broken, code, mates)
        # the from-scratch rule at run time (a worker's, where nothing but student code and stand-ins runs)
        self.guard = Guard(isolate_for, forbidden, self.package.pieces, self.package.codes).install() \
            if forbidden and isolate_for else None
        # Tensors are copied in and out; in a worker the codec has copied them already (copies=False).
        self.copies = copies
        self.objects: dict[int, Any] = {}
        self._kept: tuple[Any, dict[str, torch.nn.Parameter]] | None = None  # a forward's output, for `backward`
        self.folder = str(self.package.folder)

    # --- plain data in and out -------------------------------------------------
    def _inbound(self, value: Any) -> Any:
        if isinstance(value, Ref):
            return self.objects[value.id]
        if isinstance(value, torch.Tensor):
            return value.detach().clone() if self.copies else value
        if isinstance(value, (list, tuple)):
            return type(value)(self._inbound(v) for v in value)
        if isinstance(value, dict):
            return {k: self._inbound(v) for k, v in value.items()}
        return value

    def _outbound(self, value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            plain = value.detach().as_subclass(torch.Tensor)
            return plain.clone() if self.copies else plain
        if value is None or isinstance(value, (bool, int, float, str, bytes, torch.dtype, torch.device, torch.Size)):
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
            raise LoadFailed("ImportError", exc.args[0] if exc.args else str(exc)) from None
        except StudentError as exc:
            raise exc from None
        except Exception as exc:  # noqa: BLE001 - any failure of student code
            cls = NotStarted if isinstance(exc, NotImplementedError) else StudentError
            kinds = tuple(c.__name__ for c in type(exc).__mro__)
            raise cls(type(exc).__name__, str(exc), self._where(exc), kinds, call_label(op, request)) from None

    def _where(self, exc: BaseException, frames_shown: int = 3) -> list[tuple[str, int, str, str]]:
        """The student's own frames that led to the error, innermost last (at most `frames_shown`): each (file,
        line, function, source line)."""
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.startswith(self.folder)]
        return [(Path(f.filename).name, f.lineno or 0, f.name, (f.line or "").strip()) for f in frames[-frames_shown:]]

    def _op_load(self, module: str):
        self.package.module(module)

    def _op_reset(self):
        self.objects.clear()
        self._kept = None

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
        state = self._inbound(state)
        if _copied_into_parameters(module, state):
            return
        result = module.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            own = sorted(name for name, _ in module.named_parameters())
            raise WeightsMismatch("KeyError", Phrase("the checks load weights by the contract's names into your "
                                                   "{module}, but it has no parameters named {names} (its parameters: "
                                                   "{own})", module=type(module).__name__,
                                                   names=sorted(result.unexpected_keys), own=own or "none"))

    def _op_grad(self, name, args=(), kwargs=None, grad_output=None, output_index: int | None = None):
        """Backpropagate `grad_output` from a call; returns input and parameter gradients."""
        func = self._callee(name)
        args = [self._inbound(a) for a in args]
        for a in args:
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                a.requires_grad_(True)
        params = _without_grads(func)
        out = func(*args, **self._inbound(kwargs or {}))
        if output_index is not None:
            out = out[output_index]
        (out * self._inbound(grad_output)).sum().backward()
        return {
            "args": [self._outbound(a.grad) if isinstance(a, torch.Tensor) and a.grad is not None else None for a in args],
            "params": self._grads(params),
        }

    def _op_forward(self, name: str | Ref, args=(), kwargs=None):
        """Call a module and keep its graph for `backward` (a training step: one forward instead of two)."""
        module = self._callee(name)
        params = _without_grads(module)
        self._kept = None
        out = module(*self._inbound(tuple(args)), **self._inbound(kwargs or {}))
        self._kept = (out, params)
        return self._outbound(out)

    def _op_backward(self, grad_output):
        """Backpropagate `grad_output` through the kept forward; the parameters' gradients."""
        if self._kept is None:
            raise RuntimeError("backward without a forward")
        (out, params), self._kept = self._kept, None
        (out * self._inbound(grad_output)).sum().backward()
        return {"params": self._grads(params)}

    def _grads(self, params: dict[str, torch.nn.Parameter]) -> dict[str, Any]:
        return {n: (None if p.grad is None else self._outbound(p.grad)) for n, p in params.items()}

    def close(self) -> None:
        self._kept = None
        self.objects.clear()
        if self.guard is not None:
            self.guard.uninstall()
        self.package.close()


def _copied_into_parameters(module: Any, state: dict[str, Any]) -> bool:
    """Do what `load_state_dict(state, strict=False)` would, where that is only copying each tensor into the
    parameter of its name and shape (a training check loads the weights forty times: this takes a third of
    load_state_dict's time on a ViT's); False, having changed nothing, where it would do more or fail: a name that is no parameter (a
    buffer, a mistake), another shape, a module that loads its own way (hooks, its own load methods)."""
    if not isinstance(module, torch.nn.Module):
        return False
    params = dict(module.named_parameters(remove_duplicate=False))
    for name, value in state.items():
        param = params.get(name)
        if param is None or not isinstance(value, torch.Tensor) or value.shape != param.shape:
            return False
    base = torch.nn.Module
    for sub in module.modules():
        kind = type(sub)
        if (sub._load_state_dict_pre_hooks or sub._load_state_dict_post_hooks
                or kind.load_state_dict is not base.load_state_dict
                or kind._load_from_state_dict is not base._load_from_state_dict):
            return False
    with torch.no_grad():
        for name, value in state.items():
            params[name].copy_(value)
    return True


def _without_grads(func: Any) -> dict[str, torch.nn.Parameter]:
    """A module's parameters by name (none for a plain function), their gradients cleared."""
    params = dict(func.named_parameters()) if isinstance(func, torch.nn.Module) else {}
    for p in params.values():
        p.grad = None
    return params
