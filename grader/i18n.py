"""The language the grader speaks to learners: English (the source text) or Chinese.

One module owns the choice. It comes from, in this order: `--lang zh|en` (a
global option of the command line, `set_language`), else the locale variables
`LC_ALL`, `LC_MESSAGES`, `LANG` (the first one set decides, as gettext reads
them; `zh_CN.UTF-8`, `zh_TW`, `zh` mean Chinese, anything else English), else
English.

The translations are gettext catalogues, `grader/locale/<locale>/LC_MESSAGES/grader.po`
(extracted and updated with Babel: docs/contributors.md). No compiled `.mo` is
committed: the first Chinese run compiles the `.po` with Babel into the user's
cache (`$XDG_CACHE_HOME/transformer-drills/`, named by the `.po`'s digest, so an
edited catalogue compiles afresh), and every later run reads that `.mo` with the
standard library's `gettext.GNUTranslations`, without importing Babel. English
loads nothing.

Strings marked with `N_` are extracted but translated where they are shown
(module-level tables); `course_text` translates course.yml's titles and hints,
whose catalogue entries are keyed by component id (gettext's message context).
"""
from __future__ import annotations

import gettext as _gettext
import hashlib
import io
import os
from pathlib import Path

DOMAIN = "grader"
LOCALE_DIR = Path(__file__).resolve().parent / "locale"
LANGUAGES: dict[str, str | None] = {"en": None, "zh": "zh_CN"}  # --lang value -> gettext locale (None: the source)
DEFAULT = "en"
ENV_VARS = ("LC_ALL", "LC_MESSAGES", "LANG")  # the order gettext reads them in

_chosen: str | None = None  # --lang, when given
_catalogues: dict[str, _gettext.NullTranslations] = {}


def N_(message: str) -> str:
    """Mark `message` for extraction only; `_` translates it where it is shown."""
    return message


def language_from_env(environ: os._Environ | dict[str, str] | None = None) -> str:
    """The language the locale variables ask for: the first of LC_ALL, LC_MESSAGES, LANG that is set."""
    environ = os.environ if environ is None else environ
    for var in ENV_VARS:
        value = environ.get(var)
        if value:
            return "zh" if value.lower().startswith("zh") else DEFAULT
    return DEFAULT


def set_language(lang: str | None) -> None:
    """Use `lang` ("zh" or "en"); None goes back to the locale's choice."""
    if lang is not None and lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}: expected one of {', '.join(LANGUAGES)}")
    global _chosen
    _chosen = lang


def language() -> str:
    """The language in use: "zh" or "en"."""
    return _chosen if _chosen is not None else language_from_env()


def language_from_argv(argv: list[str]) -> str | None:
    """`--lang X` or `--lang=X` in a command line (read before the parser exists, so that --help is translated)."""
    for i, arg in enumerate(argv):
        if arg == "--":
            break
        if arg == "--lang" and i + 1 < len(argv):
            return argv[i + 1] if argv[i + 1] in LANGUAGES else None
        if arg.startswith("--lang="):
            value = arg.partition("=")[2]
            return value if value in LANGUAGES else None
    return None


def po_path(lang: str) -> Path:
    """The catalogue of `lang` (a key of LANGUAGES other than the source's)."""
    return LOCALE_DIR / LANGUAGES[lang] / "LC_MESSAGES" / f"{DOMAIN}.po"


def catalogue(lang: str | None = None) -> _gettext.NullTranslations:
    """The translations of `lang` (default: the language in use), loaded once per process."""
    lang = lang or language()
    found = _catalogues.get(lang)
    if found is None:
        found = _catalogues[lang] = _load(lang)
    return found


def _cache_dirs() -> tuple[Path, Path]:
    """Where compiled catalogues are kept: the user's cache, else (read-only home) a folder in the temporary one
    (/tmp, per user by its name; on Windows %LOCALAPPDATA% and the user's own %TEMP%, and no os.getuid)."""
    import tempfile

    base = os.environ.get("XDG_CACHE_HOME") or (os.name == "nt" and os.environ.get("LOCALAPPDATA")) or os.path.join(
        os.path.expanduser("~"), ".cache")
    tmp = os.environ.get("TMPDIR") or tempfile.gettempdir()
    user = f"-{os.getuid()}" if hasattr(os, "getuid") else ""
    return Path(base) / "transformer-drills", Path(tmp) / f"transformer-drills{user}"


def _load(lang: str) -> _gettext.NullTranslations:
    if LANGUAGES[lang] is None:
        return _gettext.NullTranslations()
    try:
        po = po_path(lang).read_bytes()
    except OSError:  # a bundle without its catalogue: the source text rather than a crash
        return _gettext.NullTranslations()
    name = f"{DOMAIN}-{LANGUAGES[lang]}-{hashlib.sha256(po).hexdigest()[:16]}.mo"
    for folder in _cache_dirs():
        try:
            with open(folder / name, "rb") as mo:
                return _gettext.GNUTranslations(mo)
        except OSError:
            continue
    data = compile_po(po)
    import tempfile

    for folder in _cache_dirs():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=".mo-")
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, folder / name)  # atomic: a concurrent run reads the old name or the whole file
            break
        except OSError:
            continue
    return _gettext.GNUTranslations(io.BytesIO(data))


def compile_po(po: bytes) -> bytes:
    """A `.po` catalogue's text compiled to `.mo` bytes (Babel; only when the cache lacks it)."""
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    out = io.BytesIO()
    write_mo(out, read_po(io.BytesIO(po)))  # fuzzy entries are left out, as msgfmt does
    return out.getvalue()


def _(message: str) -> str:
    """`message` in the language in use."""
    return catalogue().gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural of a message for `n`, in the language in use."""
    return catalogue().ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """`message` in the language in use, its catalogue entry keyed by `context`."""
    return catalogue().pgettext(context, message)


def course_context(key: str) -> str:
    """The message context of course.yml's texts for one component or assignment id (grader/i18n_extract.py)."""
    return f"course.yml:{key}"


def course_text(key: str, text: str, lang: str | None = None) -> str:
    """A title or hint of course.yml (`key`: a component's or an assignment's id) in `lang` (default: in use)."""
    return catalogue(lang).pgettext(course_context(key), text) if text else text
