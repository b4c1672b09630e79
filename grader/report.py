"""Reports over one result model: terminal table, JSON, Gradescope results.json."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TextIO

from .results import ERROR, FAILED, NOT_STARTED, PASSED, TIMEOUT, Report

STYLE = {PASSED: "green", FAILED: "red", ERROR: "red", TIMEOUT: "magenta", NOT_STARTED: "yellow"}


def _points(score: float, max_score: float) -> str:
    return f"{score:g}/{max_score:g}" if score == int(score) else f"{score:.1f}/{max_score:g}"


def print_terminal(report: Report, *, verbose: bool = False, hints: bool = False, file: TextIO | None = None) -> None:
    """A table per component; each failing component's first failing check; -v lists every check."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    file = file or sys.stdout
    console = Console(file=file, highlight=False, soft_wrap=not file.isatty())
    table = Table(title=f"transformer-drills: {report.target}", title_justify="left")
    table.add_column("component")
    table.add_column("points", justify="right")
    table.add_column("status")
    for component in report.components:
        table.add_row(component.id, _points(component.score, component.max_score),
                      Text(component.status, style=STYLE[component.status]))
        if verbose:
            for check in component.checks:
                cases = f" ({check.cases_passed}/{check.cases_total} cases)" if check.cases_total > 1 else ""
                table.add_row(Text(f"  {check.name}", style="dim"), _points(check.score, check.max_score),
                              Text(check.status + cases, style=STYLE[check.status]))
    table.add_row(Text("total", style="bold"), Text(_points(report.score, report.max_score), style="bold"), "")
    console.print(table)
    for component in report.components:
        if component.status in (PASSED, NOT_STARTED):
            continue
        console.print(Text(f"\n{component.id}: {component.status}", style=f"bold {STYLE[component.status]}"))
        console.print(Text(_indent(component.message)))
        if hints and component.hint:
            console.print(Text(_indent(f"hint: {component.hint}"), style="cyan"))
    not_started = [c.id for c in report.components if c.status == NOT_STARTED]
    if not_started:
        console.print(Text(f"\nnot started yet: {', '.join(not_started)}", style="yellow"))


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def to_json(report: Report) -> str:
    return json.dumps(report.to_dict(), indent=2)


def to_gradescope(report: Report) -> dict:
    """Gradescope's results.json: top-level score, one test per check tagged with its component."""
    tests = []
    for component in report.components:
        for check in component.checks:
            output = check.message or ("passed" if check.status == PASSED else check.status)
            if check.cases_total > 1:
                output = f"{check.cases_passed}/{check.cases_total} cases passed. " + output
            tests.append({
                "name": f"{component.id}: {check.name}",
                "score": round(check.score, 4),
                "max_score": round(check.max_score, 4),
                "status": "passed" if check.status == PASSED else "failed",
                "output": output,
                "tags": [component.id, check.status],
            })
    return {
        "score": round(report.score, 4),
        "output": f"{report.score:.1f}/{report.max_score:g} points",
        "tests": tests,
    }


def write_results(report: Report, path: str | Path, fmt: str = "gradescope") -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    content = json.dumps(to_gradescope(report), indent=2) if fmt == "gradescope" else to_json(report)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(content)
    tmp.replace(path)
