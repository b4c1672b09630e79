"""Mistake models: what a known, common mistake would output on the checks' own inputs.

Each mistake is one entry of the catalogue (`catalogue.py`: an id, the component,
the sentence addressed to the student, the model), declared once, in the module
of its component (`mistakes/<component>.py`, e.g. `mistakes/masking.py`), and
shared by every check that can see it; a mistake that is no one component's is
declared in `mistakes/general.py` (`GENERAL`), beside the recognisers and
combinators that every component's bundles use (`besides`, `mapped`,
`fitted_besides`, `error_mistake`, ...). A model computes, grader-side and with
PyTorch operations only (never from `solutions/`), the output of the mistake
from the same inputs and injected weights a check already has; a component's
simulator (`attention`, `mha`, `block`, ...) computes many mistakes, each entry
one of its switches, and another component that shares it imports it from its
module. The `*_mistakes` bundles bind entries to a check's inputs: a mapping
{entry or Named: zero-arg callable}, so that nothing is computed unless the check
fails. `compare.assert_close` (and friends) take such a mapping as `mistakes=`
and weigh every mistake against what came back. Mistakes that a check
recognises by itself (from an error that student code raised) are entries too
(`recognised`), named by the check; an error that no check caught is named by
`general.error_mistake`, which asks the component's own `named_error` where its
module has one.

The order of imports: `catalogue` and `tolerance`, then `general`, then
`compare` (which weighs `general`'s dtype and squeeze entries on every
comparison), then the components' modules; no module imports one above it.
Each check file imports its own component's module (and whatever it shares
from others by name); this package re-exports nothing.

Models compute in float64; the comparison uses the check's own tolerance.
"""
