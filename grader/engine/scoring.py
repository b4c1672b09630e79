"""Scoring one component by course.yml: each check's share of the points, in whole units."""
from __future__ import annotations

import math
from fractions import Fraction

from ..check_text import diagnosis_line, render
from ..contract import FILES
from ..course import POINT_UNITS, Component
from ..figures import figures_showing, see_line
from ..i18n import catalogue, language
from ..results import (ERROR, FAILED, MESSAGE_LIMIT, NOT_STARTED, PASSED, TIMEOUT, CaseResult, CheckResult,
                       ComponentResult, with_diagnosis)
from ..sandbox.protocol import FORBIDDEN_CALL_CLASS


def named_mistakes(cases: list[CaseResult]) -> list[dict]:
    """The known mistakes ({"id", "fields"}) that explain a check's failing cases: each matched in at least one
    of them and ruled out in none (in the order first matched)."""
    failing = [c for c in cases if c.status != PASSED]
    ruled_out = {_key(item) for c in failing for item in c.ruled_out}
    named = {_key(item): item for c in failing for item in c.matched if _key(item) not in ruled_out}
    return list(named.values())


def _key(item: dict) -> tuple:
    return item["id"], tuple(sorted(item["fields"].items()))


RULE = "test_from_scratch"  # the from-scratch rule's check (tests/checklib/scratch.py)
FORBIDDEN_CALL = f"raised {FORBIDDEN_CALL_CLASS}: "  # how a failing case's message shows a guard's refusal (grader/sandbox/forbid.py)


def _broken_rule(component: Component, own: list[CaseResult], outcomes: dict[str, tuple[str, int, int, str]],
                 lang: str) -> str | None:
    """Why the component broke the from-scratch rule, or None: its check found a forbidden call in the source, or
    a case of any of its checks failed on one that a guard stopped while the code ran (a way no reading follows).

    The rule is a gate: breaking it takes every point of the component, so a library call is never worth one.
    """
    if RULE not in outcomes or not component.forbidden:
        return None
    if outcomes[RULE][0] == FAILED:
        return outcomes[RULE][3]
    stopped = next((c for c in own if c.status != PASSED and FORBIDDEN_CALL in c.message), None)
    if stopped is None:
        return None
    return shown(stopped, lang)


def diagnosed_message(case: CaseResult, named: list[dict], lang: str) -> str:
    """A failing case's message in `lang`, with the diagnosis line of the mistakes `named` before its hint."""
    return with_diagnosis(case.message, diagnosis_line(named, lang), shown(case, lang))


def shown(case: CaseResult, lang: str) -> str:
    """A failing case's message in `lang`, as long as a message may be (its texts were cut where they were stored,
    not the whole)."""
    return render(case.text or case.message, lang)[:MESSAGE_LIMIT]


def score_component(component: Component, cases: list[CaseResult], load_errors: dict[str, str],
                    lang: str | None = None) -> ComponentResult:
    """Score one component by course.yml: each check's share of the points, in whole units.

    A check earns its share times the fraction of its cases that pass; a gated check (see
    Component.gated) also times the fraction of the points its component's core checks earn,
    so code that does not do the work earns nothing from properties that such code keeps.
    """
    lang = lang or language()
    _ = catalogue(lang).gettext
    broken = [render(load_errors[f], lang)[:MESSAGE_LIMIT] for f in FILES[component.id] if f in load_errors]
    own = [c for c in cases if c.component == component.id]
    units = component.check_units()
    outcomes: dict[str, tuple[str, int, int, str]] = {}  # name -> status, cases passed, cases run, message
    texts: dict[str, str | dict] = {}  # name -> its first failing case's message as data
    diagnoses: dict[str, list[dict]] = {}  # name -> the known mistakes its failing cases name
    for name in component.checks:
        runs = [c for c in own if c.check == name]
        if broken:
            outcomes[name] = (ERROR, 0, len(runs), broken[0])
            continue
        if not runs:
            outcomes[name] = (ERROR, 0, 0, _("check did not run"))
            continue
        passed = sum(c.status == PASSED for c in runs)
        failing = next((c for c in runs if c.status != PASSED), None)
        status = PASSED if failing is None else failing.status
        if failing is not None and status == NOT_STARTED and any(c.status not in (NOT_STARTED, PASSED) for c in runs):
            status = FAILED
        diagnoses[name] = named_mistakes(runs)
        texts[name] = "" if failing is None else failing.text or failing.message
        outcomes[name] = (status, passed, len(runs),
                          "" if failing is None else diagnosed_message(failing, diagnoses[name], lang))

    def earned(name: str) -> Fraction:
        _, passed, total, _ = outcomes[name]
        return units[name] * Fraction(passed, total) if total else Fraction(0)

    core_units = sum(units[name] for name in component.core)
    gate = sum(earned(name) for name in component.core) / core_units if core_units else Fraction(1)
    gated = set(component.gated)
    rule = _broken_rule(component, own, outcomes, lang)
    if rule is not None:
        outcomes[RULE] = (FAILED, 0, outcomes[RULE][2] or 1, rule)
    checks: list[CheckResult] = []
    for name, (status, passed, total, message) in outcomes.items():
        share = earned(name) * (gate if name in gated else 1)
        note = ""
        if rule is not None:  # the rule is a gate on every check: a library call that skips the work earns nothing
            share = Fraction(0)
            note = _("the from-scratch rule is broken: no check of this component pays")
        elif name in gated and gate < 1 and passed:
            note = _("gated: pays once {checks} pass (they earn {share} of their points so far)").format(
                checks=", ".join(component.core), share=f"{math.floor(gate * 100)}%")
        checks.append(CheckResult(name, component.id, status, math.floor(share + Fraction(1, 2)) / POINT_UNITS,
                                  units[name] / POINT_UNITS, passed, total, message, name in component.hidden, note,
                                  diagnoses.get(name, []), texts.get(name, "")))
    score = round(sum(c.score for c in checks), 6)  # whole units: the rounding only drops float noise
    statuses = {c.status for c in checks}
    if broken:
        status, message = ERROR, broken[0]
    elif statuses == {PASSED}:
        status, message = PASSED, ""
    elif statuses == {NOT_STARTED}:
        status, message = NOT_STARTED, _("not started: every check raised NotImplementedError")
    else:
        failing_checks = [c for c in checks if c.status != PASSED]
        first = next((c for c in failing_checks if not c.hidden), failing_checks[0])
        status = TIMEOUT if first.status == TIMEOUT else FAILED
        message = f"{first.name}: {first.student_message}"
    figures = figures_showing(component.id, {c.name for c in checks if c.status == FAILED and not c.hidden}) \
        if status == FAILED else []  # a wrong value that a picture shows
    if figures:
        message += f"\n{see_line(component.id, figures)}"
    return ComponentResult(component.id, component.title, status, score, component.points, checks, message,
                           component.hint, figures)
