"""The catalogue of known mistakes: each one entry, declared once, shared by every check that can see it.

An entry (`Mistake`) has an id (`component:name`, unique), the component whose
checks see it, the sentence a student reads (unique; a template with
`{fields}` where it depends on the inputs, e.g. the fill value used), and its
model: what the mistake computes on a check's inputs. A model is one of

- a function of the inputs that a bundle binds it to (`entry.on(q, k)`),
- the switches of a simulator in a component's `mistakes/<component>.py` that several checks share
  (`dict(softmax_dim=-2)` for both `attention()` and `mha()`), bound with
  `simulated(entries, simulate)`,

computing in float64 from the check's own inputs and weights, never from
`solutions/`. The bundles of `mistakes/` return entries bound to a check's
inputs: {sentence: zero-arg callable}, the mapping that `compare.py` takes.
Declaring an entry registers it in `CATALOGUE`; an id or a sentence declared
twice is an error at import.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

Mistakes = dict[str, Any]


@dataclass(frozen=True, eq=False)  # an entry is itself: its model may be a dict
class Mistake:
    component: str
    name: str
    sentence: str  # in the learner's terms; `{field}`s filled in by `text`
    model: Callable[..., Any] | dict[str, Any]

    @property
    def id(self) -> str:
        return f"{self.component}:{self.name}"

    def text(self, **fields: Any) -> str:
        """The sentence, its fields filled in (a sentence without fields is returned as it is)."""
        return self.sentence.format(**fields) if fields else self.sentence

    def on(self, *inputs: Any) -> Callable[[], Any]:
        """The model bound to a check's inputs, computed only when called (when the check fails)."""
        if isinstance(self.model, dict):
            raise TypeError(f"{self.id} is a switch of a simulator: bind it with simulated()")
        return lambda: self.model(*inputs)


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
    """{sentence: lazy model} of entries whose models are functions of these inputs."""
    return {entry.text(**fields): entry.on(*inputs) for entry in entries}


def simulated(entries: Iterable[Mistake], simulate: Callable[..., Any]) -> Mistakes:
    """{sentence: lazy simulate(**switches)} of entries whose models are switches of `simulate`."""
    return {entry.sentence: (lambda switches=entry.model: simulate(**switches)) for entry in entries}
