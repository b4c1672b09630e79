"""The figures of some components for a submission folder: its code run in confined workers, never here."""
from __future__ import annotations

from pathlib import Path

from ..engine.remote import remote_targets
from ..figures import FIGURES
from .data import Figure, component_figures


def learner_figures(target: str | Path, components: list[str] | dict[str, list[str]], *,
                    timeout: float | None = None) -> dict[str, list[Figure]]:
    """component -> its figures (grader/figures.py; given a dict, only the figures it names), the learner's
    panels from the code in `target`."""
    wanted = components if isinstance(components, dict) else {c: list(FIGURES.get(c, ())) for c in components}
    components = [c for c in wanted if c in FIGURES]
    if not components:
        return {}
    with remote_targets(target, timeout=timeout) as pool:
        pool.prespawn(components)  # the workers start (and import the files) at once
        figures = {}
        for component in components:
            impl = pool.target(component)
            try:
                figures[component] = component_figures(component, impl, wanted[component])
            finally:
                impl.close()
    return figures
