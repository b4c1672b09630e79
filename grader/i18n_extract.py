"""Babel extractor for course.yml (babel.cfg names it): the titles and hint ladders learners read.

Each text becomes a catalogue entry whose message context is its component's
or assignment's id (`grader.i18n.course_context`), so that the translation is
keyed by id and an English edit shows up in `pybabel update` as a changed entry.
Only Babel's extraction imports this module.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

import yaml

from .i18n import course_context

FIELDS = {"assignments": ("title",), "components": ("title", "hint", "hints")}


def extract_course(fileobj: BinaryIO, keywords, comment_tags, options) -> Iterator[tuple]:
    """Yield (line, "pgettext", (context, text), comments) for every translatable text of a course.yml."""
    root = yaml.compose(fileobj.read().decode("utf-8"))
    sections = {key.value: value for key, value in root.value}
    for section, fields in FIELDS.items():
        node = sections.get(section)
        for entry in node.value if node is not None else []:
            values = {key.value: value for key, value in entry.value}
            key = values["id"].value
            for field in fields:
                found = values.get(field)
                if found is None:
                    continue
                items = found.value if isinstance(found, yaml.SequenceNode) else [found]
                for n, item in enumerate(items, 1):
                    where = f"{section[:-1]} {key}, {field}" + (f" {n}" if field == "hints" else "")
                    yield item.start_mark.line + 1, "pgettext", (course_context(key), item.value), [where]
