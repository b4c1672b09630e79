"""The checks' messages in the reader's language: a failure's texts rendered from their data, never read back.

A failing check's message is data (grader/text.py): each text is its English template, the id its
translation is found by in the catalogue (message context CONTEXT, where grader/i18n_extract.py puts the
checks' `Phrase(...)` templates and the hints and calls they write as plain strings), with its fields' values;
the known mistakes it names travel apart from it, by id and fields (grader/results.py CaseResult), and
`diagnosis_line` words them from the mistake's sentence under its id. `render` gives a text in a language:
the template's translation, each field filled in with its value rendered in turn (a call in a problem); a
value the translation quotes (「{error}」: an error's text, student code's or torch's) is put in as it came,
never read; a plain string is translated only where the catalogue holds it whole. What the grader words
outside the checks (a worker's crash, a timeout, a file that failed to import) is a Phrase of its own modules.
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from . import i18n
from .checks_library import mistake_sentence
from .results import AMBIGUOUS, DIAGNOSIS, HINT
from .text import DEPTH, Phrase, from_data

CONTEXT = "check"  # the message context of the checks' sentences in the catalogue
LABELS = {DIAGNOSIS: i18n.N_("  diagnosis: "), HINT: i18n.N_("  hint: ")}  # (a diagnosis line: diagnosis_line)
# How a failing check's message is laid out (tests/checklib/compare.py): its first line "<the call>: <what went
# wrong>" (the catalogue holds the layout with a hint line, which has a word, as the checks' own)
LAYOUT = i18n.N_("{what}: {problem}")


def diagnosis_line(named: list[dict], lang: str | None = None) -> str:
    """The line a message carries for the known mistakes (`{"id", "fields"}`) that explain it ("" for none), in
    `lang` (default: the language in use): each sentence is its catalogue entry under the mistake's id, the values
    of its fields translated where the catalogue knows them."""
    if not named:
        return ""
    lang = lang or i18n.language()
    words = i18n.catalogue(lang)
    sentences = [mistake_text(item, lang) for item in named]
    if len(sentences) == 1:
        return words.gettext(DIAGNOSIS) + sentences[0]
    return words.gettext(DIAGNOSIS) + words.gettext(AMBIGUOUS) + ("；" if lang == "zh" else "; ").join(sentences)


def mistake_text(item: dict, lang: str) -> str:
    """The sentence of one named mistake (`{"id", "fields"}`) in `lang`."""
    return _sentence(item["id"], tuple(item["fields"].items()), lang)


@lru_cache(maxsize=4096)
def _sentence(mistake_id: str, fields: tuple[tuple[str, str], ...], lang: str) -> str:
    english = mistake_sentence(mistake_id)
    template = i18n.catalogue(lang).pgettext(mistake_id, english)
    if not fields:
        return template
    # a field's value comes as the English sentence shows it (its spec applied): the template's own spec goes
    return FIELD.sub(lambda field: "{" + field[1] + "}", template).format(
        **{name: value if lang == i18n.DEFAULT else _whole(value, lang) for name, value in fields})


def render(value: Any, lang: str | None = None) -> str:
    """A text (a Phrase, its data, or a plain string) in `lang` (default: the language in use)."""
    lang = lang or i18n.language()
    if isinstance(value, dict):
        value = from_data(value)
    if not isinstance(value, str):
        value = str(value)
    if lang == i18n.DEFAULT:
        return str(value)
    try:
        return _rendered(value, lang, 0)
    except (IndexError, KeyError, ValueError, AttributeError):  # a translation that does not fit its English
        return str(value)


def _rendered(value: str, lang: str, depth: int) -> str:
    if not isinstance(value, Phrase) or depth > DEPTH:
        return _whole(str(value), lang)
    # a phrase of the checks, else of the grader's own modules; else one the catalogue does not hold (a composition,
    # `Phrase.joined`): its parts
    translation = _translation(value.template, lang, True) or value.template
    if not value.fields:
        return translation
    quoted = _quoted(translation)
    filled = {name: str(field) if name in quoted else _rendered(field, lang, depth + 1)
              for name, field in value.fields.items()}
    return FIELD.sub(lambda field: "{" + field[1] + "}", translation).format_map(filled)


def _whole(text: str, lang: str) -> str:
    """A plain text (a hint, a call, a field's value): the checks' translation of it whole, else as it is."""
    found = _translation(text, lang, False) if re.search("[A-Za-z]{2}", text) else None
    return text if found is None else found


@lru_cache(maxsize=8192)
def _translation(template: str, lang: str, phrase: bool) -> str | None:
    """The catalogue's translation of a text, or None: the checks' (context CONTEXT); for a phrase's template, else
    the grader's own (its modules' `Phrase(...)` calls and LAYOUT, extracted without a context). A plain text is
    never taken for one of the grader's words (a field `step` is code, not the command's "step")."""
    words = i18n.catalogue(lang)
    found = words.pgettext(CONTEXT, template)
    if found == template and phrase:
        found = words.gettext(template)
    return found if found != template else None


@lru_cache(maxsize=64)
def _quoted(translation: str) -> frozenset[str]:
    """The fields a translation quotes as they came (「{error}」)."""
    return frozenset(field[1] for span in re.findall("「[^」]*」", translation) for field in FIELD.finditer(span))


FIELD = re.compile(r"\{([^{}:!]*)[^{}]*\}")  # a template's field, `{fill:g}`: its name is group 1
