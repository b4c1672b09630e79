"""Student text made inert, one function per format.

Anything a submission controls can reach a report: an exception's message and
its class's name, a value a failure message quotes, the source line of a file
that does not load, the name of a student's folder (which may not even be
UTF-8). Every format writes such text only through its function here, applied
where that format writes a field (grader/channels/render/formats.py, batch/records.py,
nbgrader/notebook.py, classroom.py), never per attack:

| format | function | what it does |
|---|---|---|
| terminal, notebook output, Gradescope, HTML | `visible` | control and format characters shown escaped |
| GitHub Actions log (the Classroom reporter) | `actions_log` | `visible`, and no line a workflow command |
| Markdown | `markdown_block`, `markdown_inline` | a fence longer than any backtick run; inline text escaped |
| JUnit (XML 1.0) | `visible` | nothing XML 1.0 forbids is left (ElementTree escapes `<`, `&`, `"`) |
| CSV | `csv_cell` | no cell starts a formula (OWASP: a leading `'`) |
| JSON | `unicode` | names that were not UTF-8 become valid Unicode (json escapes the rest) |

`each_text(value, how)` applies one of them to every string of a report (a
dataclass, a dict, a list): a format that starts from it cannot forget a field.
"""
from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Callable

# Shown escaped: C0 controls but newline and tab, DEL, C1 controls, surrogates (bytes that were not UTF-8,
# os.fsdecode's surrogateescape), format characters (bidi overrides and isolates, zero-width characters),
# line and paragraph separators, and the two noncharacters XML 1.0 refuses.
_NAMED = {"\n", "\t"}


def _hidden(char: str) -> bool:
    if char in _NAMED:
        return False
    code = ord(char)
    if code < 0x20 or 0x7F <= code < 0xA0 or code in (0xFFFE, 0xFFFF):
        return True
    return unicodedata.category(char) in ("Cf", "Cs", "Zl", "Zp")


_CANDIDATES = re.compile("[^\t\n\x20-\x7e]")  # all but printable ASCII: then asked of `_hidden`


def _escape(match: re.Match) -> str:
    char = match.group()
    if not _hidden(char):
        return char
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape): the byte itself
        return f"\\x{code - 0xDC00:02x}"
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def visible(text: str) -> str:
    """`text` with every control or format character (ESC, CSI, BEL, NUL, backspace, carriage return, U+202E,
    ...) and every byte that was not UTF-8 written as a visible escape (`\\x1b`, `\\u202e`, `\\xff`): nothing in
    it can move a cursor, clear a screen, set a title or clipboard, link, reorder text, or break XML 1.0."""
    return _CANDIDATES.sub(_escape, text) if _CANDIDATES.search(text) else text


def actions_log(text: str) -> str:
    """Text a GitHub Actions step prints (the Classroom reporter's messages): `visible`, and no line of it a
    workflow command (`::add-mask::`, `::error::`, `::stop-commands::`; a line starting `::` gets a `\\`)."""
    return re.sub(r"(?m)^(\s*)::", r"\1\\::", visible(text))


def unicode(text: str) -> str:
    """JSON: the text exactly, but a name's bytes that were not UTF-8 (lone surrogates) written as `\\xNN`, so
    that every parser reads valid Unicode."""
    return re.sub("[\ud800-\udfff]", _escape, text)


def name(path_name: str) -> str:
    """A file or folder name as reports show it: bytes that were not UTF-8 and control characters escaped."""
    return visible(path_name)


_FORMULA = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(text: str) -> str:
    """A CSV cell that a spreadsheet reads as text: visible, and prefixed with `'` where it would start a
    formula (`=`, `+`, `-`, `@`, tab, carriage return, or their full-width forms; OWASP's CSV injection)."""
    text = visible(text)
    return "'" + text if text.startswith(_FORMULA) else text


def markdown_block(text: str) -> list[str]:
    """Lines of a Markdown code block holding `text` as it reads: fenced with more backticks than any run of
    them inside (so no line can close it), its characters visible; nothing in it is a heading, table, link,
    image or HTML."""
    text = visible(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *text.split("\n"), fence]


_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|~>])")


def markdown_inline(text: str) -> str:
    """Text inside a Markdown line (a table cell, a heading): one line, its punctuation backslash-escaped and
    `<`, `&` as entities, so it can start no link, image, emphasis, cell or HTML tag."""
    text = visible(text).replace("\n", " ").replace("&", "&amp;").replace("<", "&lt;")
    return _MARKDOWN_SPECIAL.sub(r"\\\1", text)


def each_text(value, how: Callable[[str], str]):
    """`value` with `how` applied to every string in it (dict keys too), through dataclasses, dicts, lists and
    tuples; other values as they are."""
    if isinstance(value, str):
        return how(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.replace(value, **{f.name: each_text(getattr(value, f.name), how)
                                             for f in dataclasses.fields(value) if f.init})
    if isinstance(value, dict):
        return {each_text(k, how): each_text(v, how) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(each_text(v, how) for v in value)
    return value
