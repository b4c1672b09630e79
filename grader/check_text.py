"""The checks' diagnoses and hints in the learner's language, translated where the grader scores them.

The checks write their messages in English (tests/): what was called, what came
back, then `  diagnosis: <sentence>` and `  hint: <text>` lines (grader/results.py
words those). The results the checks leave (and the result cache) stay English;
grader/engine/scoring.py passes each message through `translated` once the
language is known, so every channel shows the same text. A sentence is found in
the catalogue under the message context CONTEXT (grader/i18n_extract.py's
`extract_checks` puts every known mistake's sentence and every constant hint
there); a known mistake whose sentence is a template (`{fill:g}`) is matched with
its fields filled in. Of a check's first line ("<the call>: <problem>") the
problem is translated where it is one of PROBLEMS, the call kept. A line the
catalogue does not know stays as it is.
"""
from __future__ import annotations

import re
from functools import lru_cache

from . import i18n
from .results import AMBIGUOUS, DIAGNOSIS, HINT

CONTEXT = "check"  # the message context of the checks' sentences in the catalogue
LABELS = {DIAGNOSIS: i18n.N_("  diagnosis: "), HINT: i18n.N_("  hint: ")}
# How tests/checklib/compare.py, checklib/student.py and the sandbox's errors word what went wrong, at the end
# of a failing check's first line ("<what was called>: <problem>"); the call itself stays as it is.
PROBLEMS = (
    i18n.N_("{count} of {total} {dtype} values differ (largest error {error}, allowed {atol} + {rtol}·|expected|); "
            "first at index {index}: expected {expected}, got {got}"),
    i18n.N_("{count} of {total} {dtype} values differ; first at index {index}: expected {expected}, got {got}"),
    i18n.N_("expected shape {expected}, got {got}"),
    i18n.N_("expected dtype {expected}, got {got}"),
    i18n.N_("expected a torch.Tensor, got {got}"),
    i18n.N_("expected a tensor on device {expected}, got one on {got}"),
    i18n.N_("expected the two results to differ, but they are equal"),
    i18n.N_("expected a ValueError, but it returned {got}"),
    i18n.N_("expected a ValueError, got {got}"),
    i18n.N_("your code raised {error} while running `{call}`"),
)


def translated(message: str) -> str:
    """`message` with its diagnosis and hint lines in the language in use (English: unchanged)."""
    if i18n.language() == i18n.DEFAULT or not message:
        return message
    try:
        return "\n".join(_line(line) for line in message.split("\n"))
    except (IndexError, KeyError, re.error):  # a translation that does not fit its English: show the English
        return message


def _line(line: str) -> str:
    if not line.startswith(" "):  # a check's first line: the call, then what went wrong
        for pattern, problem in _problems(i18n.language()):
            match = pattern.search(line)
            if match:
                return line[:match.start()] + ": " + FIELD.sub(lambda field: match[_group(field[1])], problem)
        return line
    for label, shown in LABELS.items():
        if line.startswith(label):
            body = line[len(label):]
            text = _ambiguous(body[len(AMBIGUOUS):]) if body.startswith(AMBIGUOUS) else _sentence(body)
            return i18n._(shown) + text if text is not None else line
    return line


def _sentence(text: str) -> str | None:
    """One sentence's translation, or None where the catalogue has none."""
    found = i18n.pgettext(CONTEXT, text)
    if found != text:
        return found
    for pattern, translation in _templates(i18n.language()):
        match = pattern.fullmatch(text)
        if match:
            return FIELD.sub(lambda field: match[_group(field[1])], translation)
    return None


def _ambiguous(text: str) -> str | None:
    """The sentences of a 'more than one' line ('; '-separated; a sentence may hold '; ' itself)."""
    parts, rest = [], text
    while rest:
        for end in [m.start() for m in re.finditer("; ", rest)] + [len(rest)]:
            found = _sentence(rest[:end])
            if found is not None:
                parts.append(found)
                rest = rest[end + 2:]
                break
        else:
            return None
    return i18n._(AMBIGUOUS) + "；".join(parts)


FIELD = re.compile(r"\{([^{}:!]*)[^{}]*\}")  # a template's field, `{fill:g}`: its name is group 1


def _group(name: str) -> str:
    return "f_" + re.sub(r"\W", "_", name)


@lru_cache(maxsize=None)
def _problems(lang: str) -> list[tuple[re.Pattern, str]]:
    """(regex of ': <problem>' at a line's end, the problem's translation) for each of PROBLEMS."""
    return [(re.compile(": " + _pattern(template) + "$"), i18n._(template)) for template in PROBLEMS
            if i18n._(template) != template]


def _pattern(template: str) -> str:
    """A regex matching `template` with its fields filled in (a field seen twice must repeat its value)."""
    pattern, seen, at = "", set(), 0
    for field in FIELD.finditer(template):
        pattern += re.escape(template[at:field.start()])
        group = _group(field[1])
        pattern += f"(?P={group})" if group in seen else f"(?P<{group}>.+?)"
        seen.add(group)
        at = field.end()
    return pattern + re.escape(template[at:])


@lru_cache(maxsize=None)
def _templates(lang: str) -> list[tuple[re.Pattern, str]]:
    """(regex of a filled-in template, its translation) for the catalogue's template sentences."""
    out = []
    for (context, template), translation in _entries(lang).items():
        if context != CONTEXT or not FIELD.search(template) or not translation:
            continue
        out.append((re.compile(_pattern(template)), translation))
    return out


def _entries(lang: str) -> dict[tuple[str | None, str], str]:
    """(context, msgid) -> msgstr of the loaded catalogue."""
    catalogue = i18n.catalogue(lang)
    raw = getattr(catalogue, "_catalog", {})
    entries = {}
    for key, value in raw.items():
        if isinstance(key, str) and "\x04" in key:
            context, _, msgid = key.partition("\x04")
            entries[(context, msgid)] = value
    return entries
