"""Reports over one result model: terminal table, JSON, Gradescope results.json, JUnit, Markdown, an HTML page."""
from __future__ import annotations

import base64
import json
import sys
from importlib import resources
from pathlib import Path
from typing import TextIO

from ...figures import FIGURES, show_command
from ...results import ERROR, FAILED, NOT_STARTED, PASSED, TIMEOUT, ComponentResult, Report
from ...files import write_atomic
from ...i18n import LANGUAGES, N_, _, course_text, language, ngettext
from ...inert import each_text, markdown_block, unicode, visible

STYLE = {PASSED: "green", FAILED: "red", ERROR: "red", TIMEOUT: "magenta", NOT_STARTED: "yellow"}
# How a status reads to a learner; the results carry the untranslated ids (JSON, tags, JUnit).
STATUS_LABELS = {PASSED: N_("passed"), FAILED: N_("failed"), ERROR: N_("error"), TIMEOUT: N_("timeout"),
                 NOT_STARTED: N_("not started")}


def status_label(status: str) -> str:
    """A status in the language in use."""
    return _(STATUS_LABELS[status]) if status in STATUS_LABELS else status


def protection_line(report: Report) -> str:
    """Which sandbox student code ran in (grader/sandbox/confine.py); a warning when there was none."""
    from ...sandbox.confine import NONE, describe

    if report.protection == "in-process":
        return _("student code ran in the grader's own process (plain pytest): nothing was confined")
    text = _("sandbox: {description}").format(description=_(describe(report.protection)))
    return _("WARNING: {text}").format(text=text) if report.protection == NONE else text


def _unprotected(report: Report) -> bool:
    """Student code ran with no sandbox at all: every output says so at its top."""
    from ...sandbox.confine import NONE

    return report.protection in (NONE, "in-process")


def format_points(score: float, max_score: float) -> str:
    """Points as scored: whole hundredths (grader/course.py), so the rows add up to the totals."""
    return f"{_number(score)}/{_number(max_score)}"


def _number(points: float) -> str:
    return f"{round(points, 2):g}"


def print_terminal(report: Report, *, verbose: bool = False, hints: bool = False, file: TextIO | None = None) -> None:
    """A table per component; each failing component's first failing check; -v lists every check.

    Every text of the report is shown `visible` (no escape sequence of a submission's reaches the terminal),
    and nothing printed is read as rich markup or emoji codes."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    file = file or sys.stdout
    tty = file.isatty()
    report = each_text(report, visible)
    console = Console(file=file, highlight=False, markup=False, emoji=False, soft_wrap=not tty, no_color=not tty,
                      width=None if tty else 200)
    unprotected = _unprotected(report)
    if unprotected:
        console.print(Text(protection_line(report), style="bold red"))
    table = Table(title=Text(f"transformer-drills: {report.target}"), title_justify="left",
                  box=box.HEAVY_HEAD if tty else None, pad_edge=False)
    table.add_column(_("component"))
    table.add_column(_("points"), justify="right")
    table.add_column(_("status"))
    for component in report.components:
        table.add_row(Text(component.id), format_points(component.score, component.max_score),
                      Text(status_label(component.status), style=STYLE[component.status]))
        if verbose:
            for check in component.checks:
                cases = _(" ({passed}/{total} cases)").format(passed=check.cases_passed, total=check.cases_total) \
                    if check.cases_total > 1 else ""
                gated = _(", gated") if check.gated else ""
                table.add_row(Text(f"  {check.name}", style="dim"), format_points(check.score, check.max_score),
                              Text(status_label(check.status) + cases + gated, style=STYLE[check.status]))
    table.add_row(Text(_("total"), style="bold"), Text(format_points(report.score, report.max_score), style="bold"), "")
    console.print(table)
    for component in report.components:
        if component.status == PASSED or (component.status == NOT_STARTED and not (hints and component.hint)):
            continue
        console.print(Text(f"\n{component.id}: {status_label(component.status)}",
                           style=f"bold {STYLE[component.status]}"))
        hint = _("hint: {hint}").format(hint=course_text(component.id, component.hint))
        if component.status == NOT_STARTED:  # --hints: where to begin, rather than nothing
            console.print(Text(_indent(hint), style="cyan"))
            continue
        console.print(Text(_indent(component.message)))
        if verbose:
            for check in component.checks:
                said = check.name in component.message or check.message == component.message  # a file not graded
                if (check.status != PASSED or check.gated) and not said:
                    console.print(Text(_indent(f"{check.name}: {check.student_message}")))
        if hints and component.hint:
            console.print(Text(_indent(hint), style="cyan"))
    not_started = [c.id for c in report.components if c.status == NOT_STARTED]
    if not_started:
        console.print(Text("\n" + _("not started yet: {components}").format(components=", ".join(not_started)),
                           style="yellow"))
    if not unprotected:
        console.print(Text(f"\n{protection_line(report)}", style="dim"))


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def to_json(report: Report) -> str:
    """The report as JSON: ids and statuses as the results hold them; the words a person reads (messages,
    titles, hints) in the language in use."""
    data = each_text(report.to_dict(), unicode)
    for component in data["components"]:
        component["title"] = course_text(component["id"], component["title"])
        component["hint"] = course_text(component["id"], component["hint"])
    return json.dumps(data, indent=2)


def to_gradescope(report: Report) -> dict:
    """Gradescope's results.json: top-level score, one test per check tagged with its component.

    The top-level output is the summary a student reads first: a row per component
    (points, status, its first failing check's whole message), and once, above it,
    each file that could not be graded; the tests of its components then only point there.
    """
    not_graded = _not_graded(report)
    tests = []
    for component in report.components:
        for check in component.checks:
            why = not_graded.get(component.id)
            tests.append({
                "name": f"{component.id}: {check.name}",
                "score": round(check.score, 2),
                "max_score": round(check.max_score, 2),
                "status": "passed" if check.status == PASSED else "failed",
                "output": _("not graded: {why} (see the top)").format(why=_first_line(why)) if why
                else _check_output(check),
                "tags": [component.id, check.status],
                "visibility": "after_published" if check.hidden else "visible",
            })
    summary = _gradescope_summary(report, not_graded)
    warning = _unprotected(report)
    return each_text({  # Gradescope shows these texts to the student: every one `visible`
        "score": round(report.score, 2),
        "output": f"{protection_line(report)}\n\n{summary}" if warning else f"{summary}\n\n{protection_line(report)}",
        "tests": tests,
    }, visible)


def _not_graded(report: Report) -> dict[str, str]:
    """component id -> why none of its checks ran (a file missing or failing to import), for those so."""
    return {c.id: c.message for c in report.components
            if c.status == ERROR and c.message and all(check.message == c.message for check in c.checks)}


def _first_line(text: str, limit: int = 120) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


def _gradescope_summary(report: Report, not_graded: dict[str, str]) -> str:
    """The total, what could not be graded (once), and per component its points, status and first failure."""
    lines = [_("{points} points").format(points=format_points(report.score, report.max_score))]
    reasons: dict[str, list[str]] = {}
    for component, why in not_graded.items():
        reasons.setdefault(why, []).append(component)
    for why, components in reasons.items():
        lines += ["", _("not graded: {why}").format(why=why),
                  "  " + _("so these components earn nothing: {components}").format(components=", ".join(components))]
    width = max([len(_("component")), *(len(c.id) for c in report.components)])
    points = {c.id: format_points(c.score, c.max_score) for c in report.components}
    points_width = max([len(_("points")), *map(len, points.values())])
    headers = _("component"), _("points"), _("status")
    lines += ["", f"{headers[0]:<{width}}  {headers[1]:>{points_width}}  {headers[2]}"]
    for component in report.components:
        status = status_label(component.status)
        if component.id in not_graded:
            status += _(" (not graded, see above)")
        lines.append(f"{component.id:<{width}}  {points[component.id]:>{points_width}}  {status}")
        if component.status not in (PASSED, NOT_STARTED) and component.id not in not_graded and component.message:
            lines.append(_indent(_indent(component.message)))
    return "\n".join(lines)


def _check_output(check) -> str:
    if check.hidden:
        return check.student_message
    if check.status == PASSED:
        passed = _("passed ({total} cases)").format(total=check.cases_total) if check.cases_total > 1 \
            else status_label(PASSED)
        return "\n".join(filter(None, [passed, check.gated]))
    cases = _("{passed}/{total} cases passed. ").format(passed=check.cases_passed, total=check.cases_total) \
        if check.cases_total > 1 else ""
    return cases + "\n".join(filter(None, [check.message or status_label(check.status), check.gated]))


def to_junit(report: Report) -> str:
    """JUnit XML: a test suite per component, a test case per check (for CI dashboards).

    Every text is `visible`, which leaves nothing that XML 1.0 forbids (ElementTree escapes the markup)."""
    import xml.etree.ElementTree as ET

    report = each_text(report, visible)

    suites = ET.Element("testsuites", name="transformer-drills", tests=str(sum(len(c.checks) for c in report.components)))
    ET.SubElement(ET.SubElement(suites, "properties"), "property", name="sandbox", value=protection_line(report))
    for component in report.components:
        failures = [c for c in component.checks if c.status != PASSED]
        suite = ET.SubElement(suites, "testsuite", name=component.id, tests=str(len(component.checks)),
                              failures=str(len(failures)))
        for check in component.checks:
            case = ET.SubElement(suite, "testcase", classname=component.id, name=check.name)
            ET.SubElement(case, "properties").extend([
                ET.Element("property", name="score", value=_number(check.score)),
                ET.Element("property", name="max_score", value=_number(check.max_score)),
            ])
            if check.status != PASSED:
                failure = ET.SubElement(case, "failure", message=check.status, type=check.status)
                failure.text = _check_output(check)
    return ET.tostring(suites, encoding="unicode", xml_declaration=True)


def to_markdown(report: Report) -> str:
    """A Markdown summary (GitHub step summaries, pull-request comments). A message is a code block whose
    fence no line of it can close (`markdown_block`); the rest is the grader's own words and the course's ids."""
    lines = [f"## transformer-drills: {format_points(report.score, report.max_score)}", "", f"_{protection_line(report)}_", "",
             "| {} | {} | {} |".format(_("component"), _("points"), _("status")), "|---|---:|---|"]
    if _unprotected(report):
        lines.insert(0, f"> **{protection_line(report)}**\n")
    for component in report.components:
        lines.append(f"| `{component.id}` | {format_points(component.score, component.max_score)} | "
                     f"{status_label(component.status)} |")
    for component in report.components:
        if component.status in (PASSED, NOT_STARTED):
            continue
        lines += ["", f"### {component.id}: {status_label(component.status)}", "", *markdown_block(component.message)]
    return "\n".join(lines) + "\n"


WHICH_FIGURES = ("failing", "all", "none")  # failing: those a failing component's message names (results.figures)


def figures_wanted(report: Report, which: str = "failing") -> dict[str, list[str]]:
    """component -> the figures the page embeds."""
    if which == "none":
        return {}
    if which == "all":
        return {c.id: list(FIGURES[c.id]) for c in report.components if c.id in FIGURES}
    return {c.id: list(c.figures) for c in report.components if c.figures}


def to_html(report: Report, figures: str = "failing") -> str:
    """One self-contained HTML page: the table, every message in full, the figures (grader/show/) as PNG data.

    The page is templates/report.html, rendered by Jinja2 with autoescaping (a
    message may quote anything a submission printed). The figures run the
    submission's code again, in confined workers as the checks do; they, Jinja2
    and matplotlib are imported only when a page is written. `figures`: whose
    figures it embeds (WHICH_FIGURES).
    """
    import jinja2

    wanted = figures_wanted(report, figures)
    drawn, failed = _draw(report, wanted)
    components = [_component(c, drawn.get(c.id, []), failed if c.id in wanted else "") for c in report.components]
    # every value the page shows is `visible` (a bidi override would reorder the page's text) and escaped
    environment = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True,
                                     lstrip_blocks=True, extensions=["jinja2.ext.i18n"],
                                     finalize=lambda value: visible(value) if type(value) is str else value)
    environment.install_gettext_callables(_, ngettext, newstyle=False)  # plain str: escaped like any text
    source = resources.files(__package__).joinpath("templates", "report.html").read_text(encoding="utf-8")
    page = environment.from_string(source)
    return page.render(report=report, components=components, total=format_points(report.score, report.max_score),
                       duration=f"{report.duration_s:.1f}" if report.duration_s else "", lang=html_lang(),
                       protection=protection_line(report), unprotected=_unprotected(report))


def html_lang() -> str:
    """The page's `<html lang>`: the language in use as a BCP 47 tag ("en", "zh-CN")."""
    return (LANGUAGES[language()] or language()).replace("_", "-")


def _draw(report: Report, components: dict[str, list[str]]) -> tuple[dict[str, list[dict]], str]:
    """component -> its figures as the template shows them; and why none could be drawn, if so."""
    if not components:
        return {}, ""
    if not Path(report.target).is_dir():
        return {}, _("no such folder: {path}").format(path=report.target)
    from ...show.draw import font_note, png
    from ...show.pictures import learner_figures

    drawn: dict[str, list[dict]] = {}
    for component, figures in learner_figures(report.target, components).items():
        drawn[component] = [{
            "name": f.name, "caption": f.caption_text(), "command": show_command(component),
            "png": base64.b64encode(png(f)).decode("ascii"),
            "verdict": "same" if f.matches else "differs" if f.matches is False else "none",
            "why": f.why_text(), "note": font_note(),
        } for f in figures]
    return drawn, ""


def _css(status: str) -> str:
    return status.replace(" ", "-")


def _component(result: ComponentResult, figures: list[dict], failed: str) -> dict:
    """What the page shows of one component (`failed`: why its figures could not be drawn)."""
    checks = [{
        "name": check.name, "label": status_label(check.status), "css": _css(check.status),
        "points": format_points(check.score, check.max_score),
        "cases": _("{passed}/{total} cases").format(passed=check.cases_passed, total=check.cases_total)
        if check.cases_total > 1 else "",
        "message": "" if check.status == PASSED and not check.gated else check.student_message,
    } for check in result.checks]
    return {"result": result, "css": _css(result.status), "points": format_points(result.score, result.max_score),
            "status": status_label(result.status), "title": course_text(result.id, result.title),
            "hint": course_text(result.id, result.hint),
            "percent": round(100 * result.score / result.max_score) if result.max_score else 0,
            "checks": checks, "figures": figures, "figures_failed": failed}


FORMATTERS = {
    "gradescope": lambda report: json.dumps(to_gradescope(report), indent=2),
    "json": to_json,
    "junit": to_junit,
    "markdown": to_markdown,
    "html": to_html,
}


def write_results(report: Report, path: str | Path, fmt: str = "gradescope", *, figures: str = "failing") -> None:
    """Write the report atomically in one of FORMATTERS' formats (`figures`: whose figures a page embeds)."""
    write_atomic(path, to_html(report, figures) if fmt == "html" else FORMATTERS[fmt](report))
