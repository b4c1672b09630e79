"""The one place where grader code imports the checks' own library, tests/checklib.

The checks import it as `checklib`, with tests/ on their path; grader code that shares its helpers (the
figures of grader/show/, the extraction of the checks' texts for translation) imports it through `checklib()`,
never by a path of its own, so the grader reaches into tests/ at this one seam. The checks belong to the
course, not to the grader's package: a grader installed without its course has none (paths.has_course).
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType

from .paths import CHECKS_DIR


def checklib(*modules: str) -> ModuleType:
    """The `checklib` package with its `modules` ("adapters", "weights", ...) imported, as the checks have it."""
    if str(CHECKS_DIR) not in sys.path:
        sys.path.insert(0, str(CHECKS_DIR))
    for module in modules:
        importlib.import_module(f"checklib.{module}")
    return importlib.import_module("checklib")


def mistake_sentence(mistake_id: str) -> str:
    """The English sentence (a template where it has `{fields}`) of the known mistake `mistake_id`
    (`component:name`): its component's module of tests/checklib/mistakes/ declares it."""
    catalogue = checklib("catalogue").catalogue
    if mistake_id not in catalogue.CATALOGUE:
        importlib.import_module(f"checklib.mistakes.{mistake_id.partition(':')[0]}")
    return catalogue.CATALOGUE[mistake_id].sentence
