"""The files the packagers generate (release.py, gradescope.py, nbgrader/course.py), read from `templates/` (real files,
linted and tested as such).

A template marks each value to fill in as `@NAME@`, which no shell script,
Makefile or Markdown here uses otherwise; `render` refuses to leave one unfilled
or to fill one that is not there. A Python template keeps each placeholder
inside a string literal ("@NAME@"), so it stays valid Python; `python_string`
escapes a value for that place.
"""
from __future__ import annotations

import json
import re
from importlib import resources

_PLACEHOLDER = re.compile(r"@([A-Z_]+)@")


def template(name: str, /) -> str:
    """The text of `templates/<name>`."""
    return resources.files(__package__).joinpath("templates", name).read_text(encoding="utf-8")


def render(template_name: str, /, **values: object) -> str:
    """`templates/<name>` with each `@KEY@` replaced by `values[key.lower()]`."""
    text = template(template_name)
    wanted = set(_PLACEHOLDER.findall(text))
    given = {key.upper() for key in values}
    if wanted != given:
        raise KeyError(f"template {template_name} takes {sorted(wanted)}, was given {sorted(given)}")
    return _PLACEHOLDER.sub(lambda m: str(values[m.group(1).lower()]), text)


def python_string(value: str) -> str:
    """`value` escaped to stand between the double quotes of a Python string literal."""
    return json.dumps(value)[1:-1]
