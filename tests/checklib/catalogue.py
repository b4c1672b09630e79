"""The catalogue of known mistakes: each one entry, declared once, shared by every check that can see it.

An entry (`Mistake`) has an id (`component:name`, unique), the component whose
checks see it, the sentence a student reads (unique; a template with
`{fields}` where it depends on the inputs, e.g. the fill value used), and its
model: what the mistake computes on a check's inputs. What travels is the id
and the fields (`Named`, as data `{"id": ..., "fields": {...}}`): in a
failure, the results, the bug catalogue's expectations and the translation
catalogue (whose entry for a mistake has its id as context); the sentence is
made from them where a report is written, in the reader's language
(grader/check_text.py `diagnosis_line`). A model is one of

- a function of the inputs that a bundle binds it to (`entry.on(q, k)`),
- the switches of a simulator in a component's `mistakes/<component>.py` that several checks share
  (`dict(softmax_dim=-2)` for both `attention()` and `mha()`), bound with
  `simulated(entries, simulate)`,

computing in float64 from the check's own inputs and weights, never from
`solutions/`. The bundles of `mistakes/` return entries bound to a check's
inputs: {entry or Named: zero-arg callable}, the mapping that `compare.py` takes.
Declaring an entry registers it in `CATALOGUE`; an id or a sentence declared
twice is an error at import.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterable, NamedTuple

from grader.check_text import mistake_text
from grader.i18n import DEFAULT as ENGLISH

Mistakes = dict["Mistake | Named", Any]


@dataclass(frozen=True, eq=False)  # an entry is itself: its model may be a dict
class Mistake:
    component: str
    name: str
    sentence: str  # in the learner's terms; `{field}`s filled in by `text`
    model: Callable[..., Any] | dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.component}:{self.name}"

    def text(self, **fields: Any) -> "Named":
        """This mistake with its sentence's fields filled in, as it travels (its English: `str()` of it): each
        value as the sentence shows it (`{base:.3g}`), so that values that read the same name one mistake."""
        specs = self._specs
        return Named(self.id, tuple((name, ("{0" + specs[name] + "}").format(value) if specs.get(name) else str(value))
                                    for name, value in sorted(fields.items())))

    @cached_property
    def _specs(self) -> dict[str, str]:
        """Each field of the sentence -> its conversion and spec, `:.3g` (the first where a field recurs)."""
        return {m[1]: m[2] for m in reversed(list(FIELD.finditer(self.sentence)))}

    def on(self, *inputs: Any) -> Callable[[], Any]:
        """The model bound to a check's inputs, computed only when called (when the check fails)."""
        if isinstance(self.model, dict):
            raise TypeError(f"{self.id} is a switch of a simulator: bind it with simulated()")
        return lambda: self.model(*inputs)


FIELD = re.compile(r"\{(\w+)((?:![rsa])?(?::[^{}]*)?)\}")  # a sentence's field: its name, its conversion and spec


class Named(NamedTuple):
    """One known mistake as a failure names it: its id and the values of its sentence's fields."""

    id: str
    fields: tuple[tuple[str, str], ...] = ()  # each field's value as the sentence shows it

    def data(self) -> dict[str, Any]:
        """What a failure carries: `{"id": ..., "fields": {...}}` (grader/results.py)."""
        return {"id": self.id, "fields": dict(self.fields)}

    def __str__(self) -> str:
        """The English sentence (what plain pytest prints; a report words it in its reader's language)."""
        return mistake_text(self.data(), ENGLISH)


Known = Mistake | Named  # a known mistake as a check names it


def named(key: Known) -> Named:
    """A mistake's entry, or one named with its fields, as it travels."""
    if isinstance(key, Named):
        return key
    if isinstance(key, Mistake):
        return Named(key.id)
    raise TypeError(f"a known mistake is named by its catalogue entry (or entry.text(...)), not {key!r}")


CATALOGUE: dict[str, Mistake] = {}
# The component of a mistake that any component's checks can see (a dtype not kept, torch's own error words).
GENERAL = "general"


def mistake(component: str, name: str, sentence: str, model: Callable[..., Any] | dict[str, Any]) -> Mistake:
    """Declare (and register) one known mistake."""
    entry = Mistake(component, name, sentence, model)
    if entry.id in CATALOGUE:
        raise ValueError(f"two known mistakes are called {entry.id}")
    same = next((other.id for other in CATALOGUE.values() if other.sentence == sentence), None)
    if same is not None:
        raise ValueError(f"{entry.id} says what {same} says: declare the mistake once and share the entry")
    CATALOGUE[entry.id] = entry
    return entry


def recognised(component: str, name: str, sentence: str) -> Mistake:
    """A mistake that a check recognises by itself (from the error student code raised, or from how it called
    something) rather than by a model's output; the check names it with `compare.diagnosed`, or passes
    `{entry: True}` with `actual=True`."""
    return mistake(component, name, sentence, lambda: True)


def variants(component: str, sentences: dict[str, str] | Iterable[tuple[str, str]]) -> tuple[Mistake, ...]:
    """The mistakes that a simulator switches on by name, (sentence, variant) pairs: one entry each, named
    by its variant, whose model is the switch `variant=<name>`."""
    pairs = sentences.items() if isinstance(sentences, dict) else sentences
    return tuple(mistake(component, variant, sentence, dict(variant=variant)) for sentence, variant in pairs)


def bind(entries: Iterable[Mistake], *inputs: Any, **fields: Any) -> Mistakes:
    """{named mistake: lazy model} of entries whose models are functions of these inputs."""
    return {entry.text(**fields): entry.on(*inputs) for entry in entries}


def simulated(entries: Iterable[Mistake], simulate: Callable[..., Any]) -> Mistakes:
    """{entry: lazy simulate(**switches)} of entries whose models are switches of `simulate`."""
    return {entry: (lambda switches=entry.model: simulate(**switches)) for entry in entries}
