"""A text of a failing check's message as data: its English template and the values of its fields.

The template is the text's id: the catalogue keys its translations by it (message context "check", what
grader/i18n_extract.py extracts from the checks' `Phrase("...", ...)` calls), as gettext keys by its msgid. A
field's value is a plain string (a shape, a call, a number as the English shows it; an error's text, student
code's or torch's) or another Phrase (a call described inside a problem). Nothing is ever read back from the
English: a channel renders the data in the reader's language (grader/check_text.py `render`).

A Phrase is also the English string it reads as (a `str`), so that the checks compose, compare and print it as
they would their f-strings. What composes texts keeps their parts: `+` (with a string or another Phrase) and
`Phrase.joined`; any other string operation gives a plain string, which renders only as a whole.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Union

# A text as data (JSON): the string itself, or {"text": template, "fields": {name: data}}
Data = Union[str, dict]
PAIR = "{a}{b}"  # the template of two texts put together
DEPTH = 32  # how deeply texts may nest in data that came from elsewhere (a worker, a result cache)


class Phrase(str):
    """`template` with its `{fields}` filled in: `Phrase("{n} of {total} values differ", n=3, total=8)`.

    A value that is not a string is shown as `str()` shows it (format it first for another form: `format(x,
    ".3g")`). A template without fields is taken as it is, braces included.
    """

    template: str
    fields: dict[str, str]

    def __new__(cls, template: str, /, **fields: Any) -> "Phrase":
        for name, value in fields.items():  # (a dict of its own: the call's keywords)
            if not isinstance(value, str):
                fields[name] = str(value)
        self = str.__new__(cls, template.format_map(fields) if fields else template)
        self.template = template
        self.fields = fields
        return self

    def __add__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return Phrase(PAIR, a=self, b=other)

    def __radd__(self, other: Any) -> Any:
        if not isinstance(other, str):
            return NotImplemented
        return Phrase(PAIR, a=other, b=self)

    def __reduce__(self):
        return _rebuilt, (self.template, self.fields)

    @staticmethod
    def joined(separator: str, items: Iterable[str]) -> "Phrase":
        """`separator.join(items)`, keeping each item's own text."""
        items = list(items)
        escaped = separator.replace("{", "{{").replace("}", "}}")
        template = escaped.join(f"{{i{n}}}" for n in range(len(items)))
        return _new(template, **{f"i{n}": item for n, item in enumerate(items)})

    def data(self, limit: int | None = None) -> dict:
        return {"text": self.template, "fields": {name: data(value, limit) for name, value in self.fields.items()}}


_new = Phrase  # (a name that the catalogue's extraction, `-k Phrase`, does not take for a text to translate)


def _rebuilt(template: str, fields: dict[str, str]) -> Phrase:
    return Phrase(template, **fields) if fields else Phrase(template)


def data(value: str, limit: int | None = None) -> Data:
    """A text (a Phrase or a plain string) as data: what results and the result cache keep (each string cut to
    `limit` characters, where one is given)."""
    return value.data(limit) if isinstance(value, Phrase) else str(value)[:limit]


def from_data(value: Any, cut: Callable[[str], str] = str, depth: int = 0) -> str:
    """The text `value` holds (a Phrase where it is one), whatever came (a worker's reply is untrusted): each string
    passed through `cut`; a template with anything but plain `{fields}` (an attribute, an index, a format spec)
    reads as it is; anything that is not text data reads as its `str()`."""
    if isinstance(value, str):
        return cut(value)
    if isinstance(value, dict) and isinstance(value.get("text"), str) and isinstance(value.get("fields"), dict) \
            and depth < DEPTH and len(value["fields"]) <= FIELDS_LIMIT:
        template = cut(value["text"])
        fields = {str(name): from_data(item, cut, depth + 1) for name, item in value["fields"].items()}
        if not fields:
            return Phrase(template)
        if all(field[1] in fields for field in _FIELD.finditer(template)) and not _BRACE.search(_FIELD.sub("", template)):
            return Phrase(template, **fields)
        return template
    return cut(str(value))


FIELDS_LIMIT = 64
_FIELD = re.compile(r"(?<!\{)\{(\w+)\}")  # a plain field; the template's other braces are escaped
_BRACE = re.compile(r"(?<!\{)\{(?!\{)|(?<!\})\}(?!\})")
