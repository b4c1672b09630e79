"""The checks' messages in the learner's language, translated where the grader scores them.

The checks write their messages in English (tests/): a first line "<the call>:
<what went wrong>", then a `  hint: <text>` line. The known mistakes a failure
names travel apart from it, by id and fields (grader/results.py CaseResult):
`diagnosis_line` words them, from the mistake's sentence in the catalogue under
its id (never by matching text). The results the checks leave (and the result
cache) stay English; grader/engine/scoring.py passes each message through
`translated` once the language is known, so every channel shows the same text.
The texts are found in the catalogue under the message context CONTEXT, where
grader/i18n_extract.py's `extract_checks` puts them from the checks' source:
every known mistake's sentence, every hint, every call a check describes and
every problem it words (f-strings become templates, `{fields}` matched filled in,
a field's value translated in turn: a call in a call); PROBLEMS adds what the
grader words outside the checks. The text of an error that student code (or
torch) raised is quoted as it came, 「...」. A part the catalogue does not know
stays as it is.
"""
from __future__ import annotations

import re
from functools import lru_cache

from . import i18n
from .checks_library import mistake_sentence
from .results import AMBIGUOUS, DIAGNOSIS, HINT

CONTEXT = "check"  # the message context of the checks' sentences in the catalogue
COLON = {"zh": "："}  # what joins "<the call>" and "<what went wrong>" in a language (else ": ")
LABELS = {DIAGNOSIS: i18n.N_("  diagnosis: "), HINT: i18n.N_("  hint: ")}  # (a diagnosis line: diagnosis_line)
# How the grader words a part of a failing check's message where student code raised, outside the checks
# (grader/i18n_extract.py extracts the checks' own wording, tests/checklib/compare.py's problems included).
PROBLEMS = (
    # grader/sandbox/protocol.py: an error raised by student code, at the end of a check's first line
    i18n.N_("your code raised {error} while running `{call}`"),
    i18n.N_("your code raised {error}"),
    # grader/sandbox/executor.py: where student code raised, and weights the contract names that it lacks
    i18n.N_("  at {file}:{line} in {function}: {source}"),
    i18n.N_("the checks load weights by the contract's names into your {module}, but it has no parameters named "
            "{names} (its parameters: {own})"),
    # grader/engine/scratch.py: a library call that does the exercise (a line of the from-scratch check's message)
    i18n.N_("  {file}:{line} in {where} uses {name}"),
    # grader/sandbox/protocol.py's NotStarted: the stubs' own words ("<component>: write <name>"), the functions
    # tests/checklib/scratch.py found untouched, or whatever else student code's NotImplementedError says
    i18n.N_("not started: {component}: write {name}"),
    i18n.N_("not started: {names} still raise NotImplementedError"),
    i18n.N_("not started: {message}"),
    # grader/sandbox/handle.py: a call that hung, or a worker that crashed (with how it ended)
    i18n.N_("timed out after {seconds} s in `{call}`"),
    i18n.N_("skipped: `{call}` timed out in an earlier check"),
    i18n.N_("{why} while running `{call}`"),
    i18n.N_("the process crashed with {signal} (a segmentation fault)"),
    i18n.N_("the process crashed with {signal} (killed: out of memory?)"),
    i18n.N_("the process crashed with {signal}"),
    i18n.N_("the process exited with status {code} (os._exit or a crash in native code)"),
    i18n.N_("the worker process stopped answering"),
    i18n.N_("the grader could not set up the sandbox for this worker (a grader error, not yours)"),
    # grader/engine/plugin.py: a check past the session's last-resort deadline
    i18n.N_("timed out: the code did not finish in time (an endless loop?)"),
    # grader/sandbox/loader.py, grader/engine/runner.py: a file that cannot be graded (a component's message)
    i18n.N_("{file} failed to import: {error}"),
    i18n.N_("{file} is missing from the submission"),
    i18n.N_("{file} did not finish importing within {seconds} s (an endless loop at import?)"),
    i18n.N_("{file} crashed the process while importing: {why}"),
    i18n.N_("no such folder: {path}"),  # (the same words as show's and the HTML page's)
)


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
        **{name: value if lang == i18n.DEFAULT else _field(value, lang) for name, value in fields})


def translated(message: str) -> str:
    """`message` in the language in use (English: unchanged), line by line; a line, or a part of one, that the
    catalogue does not know stays as it is."""
    if i18n.language() == i18n.DEFAULT or not message:
        return message
    try:
        lines = message.split("\n")
        return "\n".join(_line(line, i18n.language(), n == 0) for n, line in enumerate(lines))
    except (IndexError, KeyError, re.error):  # a translation that does not fit its English: show the English
        return message


def _line(line: str, lang: str, first: bool) -> str:
    if line.startswith(HINT):
        text = _phrase(line[len(HINT):], lang)
        return i18n._(LABELS[HINT]) + text if text is not None else line
    found = _phrase(line, lang)  # a check's first line (the call, then what went wrong), where an error was
    if found is not None:
        return found
    if first or line.startswith("  ") or not line.strip():
        return line
    # Another line of an error's text (torch's, the learner's own): quoted as it came, 「...」, as the
    # translations quote the error's first line.
    indent = line[:len(line) - len(line.lstrip())]
    return f"{indent}「{line.strip()}」"


@lru_cache(maxsize=8192)
def _phrase(text: str, lang: str) -> str | None:
    """The translation of `text`, or None where the catalogue knows no part of it.

    An entry of the catalogue, or a template of it filled in (each field's value translated in turn where
    the catalogue knows it: a call in a call); else "<what>: <problem>", split at the first ': ' outside
    brackets after which a text the catalogue knows follows (the call translated where it is known, kept
    otherwise); else a '; '-separated list of known items. A field may hold a ': ' (an error's text) only
    once the rest has failed: a call's description never swallows the problem after it.
    """
    found = _filled(text, lang, False)
    for spanning in (False, True):
        at = -1
        while found is None and (at := text.find(": ", at + 1)) >= 0:
            what, problem = text[:at], text[at + 2:]
            found = _filled(problem, lang, spanning) if _balanced(what) else None
            if found is not None:
                found = (_phrase(what, lang) or what) + COLON.get(lang, ": ") + found
    if found is None and len(parts := text.split("; ")) > 1:
        items = [_phrase(part, lang) for part in parts]  # a list ("call 0: held 0, ...; call 1: ...")
        found = "；".join(items) if all(item is not None for item in items) else None
    return found if found is not None else _filled(text, lang, True)


def _filled(text: str, lang: str, spanning: bool) -> str | None:
    """An entry of the catalogue for `text`, or the first template that matches it whole, filled in."""
    found = _exact(lang).get(text)
    if found is not None:
        return found
    for template in _templates(lang):
        if template.chunk in text:
            match = template.pattern(spanning).fullmatch(text)
            if match and (template.precise or all(_balanced(value) and (name in template.quoted or
                                                                         _known(value, lang))
                                                      for name, value in match.groupdict().items())):
                return _fill(template.translation, match, lang)
    return None


def _fill(translation: str, match: re.Match, lang: str) -> str:
    """A template's translation with the values `match` found: a value the translation quotes (「{error}」: an
    error's text, student code's or torch's) as it came, never read; any other translated where it is known."""
    quoted = [span.span() for span in re.finditer("「[^」]*」", translation)]

    def value(field: re.Match) -> str:
        found = match[_group(field[1])]
        return found if any(a < field.start() < b for a, b in quoted) else _field(found, lang)

    return FIELD.sub(value, translation)


def _known(value: str, lang: str) -> bool:
    """Whether a field's value is code (outside its brackets no word followed by another: `MultiHeadAttention(8,
    2)(x (2, 5, 8))`, `temperature=0.8, top_k=4`) or a text the catalogue knows."""
    return not PROSE.search(_outside_brackets(value)) or _field(value, lang) != value


# a word and what follows it: not a call, shape, list or an operator (`warmup_steps - 1`, `max_lr * step`)
PROSE = re.compile(r"[A-Za-z]{2,} (?![(\[+\-*/=<>%])\S")


def _outside_brackets(text: str) -> str:
    out, depth = [], 0
    for char in text:
        depth -= char in ")]}"
        if depth == 0 and char not in ")]}":
            out.append(char)
        depth += char in "([{"
    return "".join(out)


def _field(value: str, lang: str) -> str:
    """A template's field as it is shown: translated where the catalogue knows it (a call in a call, a text
    in quotes as its repr shows it)."""
    if not re.search("[A-Za-z]{2}", value):
        return value
    quoted = re.fullmatch(r"(['\"])(.*)\1", value)
    if quoted:
        found = _phrase(quoted[2], lang)
        return value if found is None else quoted[1] + found + quoted[1]
    return _phrase(value, lang) or value


def _balanced(text: str) -> bool:
    depth = 0
    for char in text:
        depth += (char in "([{") - (char in ")]}")
        if depth < 0:
            return False
    return depth == 0


FIELD = re.compile(r"\{([^{}:!]*)[^{}]*\}")  # a template's field, `{fill:g}`: its name is group 1


def _nested(depth: int) -> str:
    """A regex of one character that is not a bracket, or of a bracketed group (brackets nested `depth` deep)."""
    inner = r"[^()\[\]{}]"
    for _ in range(depth):
        inner = rf"(?:[^()\[\]{{}}]|\((?:{inner})*\)|\[(?:{inner})*\]|\{{(?:{inner})*\}})"
    return inner


# A field's value: brackets balanced (a shape or a call is never cut in two); `{}` holds a lookahead that
# keeps ': ' out of it outside brackets (a call's description before its problem), or nothing.
VALUE = "(?:{}" + _nested(4).replace("{", "{{").replace("}", "}}") + ")*?"


def _group(name: str) -> str:
    return "f_" + re.sub(r"\W", "_", name)


class _Template:
    """A catalogue text with `{fields}`, matched against a text with them filled in."""

    def __init__(self, template: str, translation: str, precise: bool = False) -> None:
        self.translation = translation
        literals = FIELD.split(template)[::2]
        self.chunk = max(literals, key=len)  # a text it matches holds this (a quick test before the regex)
        # A field holds code, a text the catalogue knows, or one the translation quotes as it came (「{got}」):
        # "{name} of {call}" matches "k of MultiHeadAttention(...)", not "The size of tensor a (3) ...".
        # A precise template (PROBLEMS) takes any value.
        self.precise = precise
        self.quoted = {_group(field[1]) for span in re.findall("「[^」]*」", translation)
                       for field in FIELD.finditer(span)}
        self.source = template
        self._patterns: dict[bool, re.Pattern] = {}

    def pattern(self, spanning: bool) -> re.Pattern:
        if spanning not in self._patterns:
            # a precise template takes any value (an error's text, a source line cut short) in both passes
            value = ".*?" if self.precise else VALUE.format("" if spanning else "(?!: )")
            self._patterns[spanning] = re.compile(_pattern(self.source, value))
        return self._patterns[spanning]


def _pattern(template: str, value: str) -> str:
    """A regex matching `template` with its fields filled in, each by `value` (a field seen twice must repeat
    its value; one right before another is not empty, or it would leave its value to the next)."""
    pattern, seen, at = "", set(), 0
    for field in FIELD.finditer(template):
        pattern += re.escape(template[at:field.start()])
        group = _group(field[1])
        shown = value[:-2] + "+?" if value.endswith("*?") and template.startswith("{", field.end()) else value
        pattern += f"(?P={group})" if group in seen else f"(?P<{group}>{shown})"
        seen.add(group)
        at = field.end()
    return pattern + re.escape(template[at:])


@lru_cache(maxsize=None)
def _exact(lang: str) -> dict[str, str]:
    """English -> translation of the texts without fields: the catalogue's (context CONTEXT) and PROBLEMS'."""
    out = {template: i18n._(template) for template in PROBLEMS if not FIELD.search(template)}
    out.update({text: translation for (context, text), translation in _entries(lang).items()
                if context == CONTEXT and translation and not FIELD.search(text)})
    return out


@lru_cache(maxsize=None)
def _templates(lang: str) -> list[_Template]:
    """The catalogue's texts with fields (context CONTEXT) and PROBLEMS (each precise, however little it
    says), the most literal text first (a template that says more is tried before one that says less)."""
    templates = [_Template(text, translation) for (context, text), translation in _entries(lang).items()
                 if context == CONTEXT and translation and FIELD.search(text)
                 and FIELD.sub("", text).strip(" :;,.")]  # not a bare field: it would match anything
    templates += [_Template(text, i18n._(text), precise=True) for text in PROBLEMS if FIELD.search(text)]
    return sorted(templates, key=lambda t: -len(FIELD.sub("", t.source)))


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
