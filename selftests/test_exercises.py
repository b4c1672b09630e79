"""The stubs: every contract name with the reference's signature, and nothing of the answer."""
from __future__ import annotations

import ast
import inspect
import importlib
from pathlib import Path

import pytest

from grader.contract import COMPONENTS, MODULES

ROOT = Path(__file__).resolve().parent.parent


def public_api(package: str) -> dict[str, inspect.Signature]:
    api = {}
    for module_name in MODULES:
        module = importlib.import_module(f"{package}.{module_name}")
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__:
                continue
            if inspect.isclass(obj):
                for attr, member in vars(obj).items():
                    if inspect.isfunction(member) and (not attr.startswith("_") or attr in ("__init__", "__len__")):
                        api[f"{module_name}.{name}.{attr}"] = inspect.signature(member)
            elif inspect.isfunction(obj):
                api[f"{module_name}.{name}"] = inspect.signature(obj)
    return api


def test_stubs_have_the_reference_signatures():
    assert public_api("exercises") == public_api("solutions")


def stub_functions():
    for module_name in MODULES:
        tree = ast.parse((ROOT / "exercises" / f"{module_name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                yield f"{module_name}.{node.name}", node


@pytest.mark.parametrize("name, node", list(stub_functions()), ids=lambda v: v if isinstance(v, str) else "")
def test_stub_body_is_only_a_docstring_and_not_implemented(name, node):
    body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    body = [s for s in body if not (isinstance(s, ast.Pass))]
    raises = body[-1] if body else None
    assert isinstance(raises, ast.Raise), f"{name} must end by raising NotImplementedError"
    call = raises.exc
    assert isinstance(call, ast.Call) and getattr(call.func, "id", "") == "NotImplementedError"
    message = ast.literal_eval(call.args[0]) if call.args else ""
    assert any(message.startswith(c) for c in COMPONENTS), f"{name}: the message should name its component: {message!r}"
    others = body[:-1]
    assert all(ast.unparse(s) == "super().__init__()" for s in others), f"{name} holds code: {[ast.unparse(s) for s in others]}"
