"""Fixtures of the graded checks.

The implementation under test is chosen at run time, never by import path:
`pytest tests --target DIR` (or DRILLS_TARGET=DIR); `exercises/` by default.
Each check file grades one component, `test_<component>.py`; its checks get a
target in which every other component's code is a trusted stand-in.
"""
from __future__ import annotations

import os
import sys
import zlib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.contract import COMPONENTS  # noqa: E402
from grader.target import Target, open_target  # noqa: E402


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--target",
        default=os.environ.get("DRILLS_TARGET", str(ROOT / "exercises")),
        help="folder with the implementation to grade (default: exercises/)",
    )


def component_of(module_name: str) -> str:
    component = module_name.rpartition(".")[2].removeprefix("test_")
    if component not in COMPONENTS:
        raise RuntimeError(f"check file test_{component}.py does not name a component")
    return component


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.component(component_of(item.module.__name__)))


@pytest.fixture
def impl(request: pytest.FixtureRequest) -> Target:
    """The implementation under test, isolated for this file's component."""
    target = open_target(request.config.getoption("--target"), isolate_for=component_of(request.module.__name__))
    yield target
    target.close()


@pytest.fixture
def gen(request: pytest.FixtureRequest) -> torch.Generator:
    """A generator seeded from the check's name: inputs are the same on every run."""
    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))
