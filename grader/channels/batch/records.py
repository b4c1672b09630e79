"""A student's results file (results/<student>.json) and the class's gradebook.csv built from them."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ...files import write_atomic
from ...inert import csv_cell, each_text, unicode

RECORD_VERSION = 1


def record_from_report(student: str, fingerprint: str, report) -> dict:
    from ..render.formats import to_gradescope

    return {"version": RECORD_VERSION, "student": student, "fingerprint": fingerprint, "status": "graded",
            "score": round(report.score, 4), "max_score": report.max_score,
            "components": {c.id: round(c.score, 4) for c in report.components},
            "duration_s": round(report.duration_s, 3), "error": "",
            "results": to_gradescope(report), "report": report.to_dict()}


def error_record(student: str, fingerprint: str, message: str) -> dict:
    from ...course import load_course

    course = load_course()
    return {"version": RECORD_VERSION, "student": student, "fingerprint": fingerprint, "status": "error",
            "score": 0.0, "max_score": course.total_points, "components": {c.id: 0.0 for c in course.components},
            "duration_s": 0.0, "error": message,
            "results": {"score": 0, "output": f"not graded: {message}", "tests": []}}


def dump(record: dict) -> str:
    """A record as its file holds it: JSON whose every string is valid Unicode (a folder name that was not
    UTF-8 has its bytes written `\\xNN`, grader/inert.py)."""
    return json.dumps(each_text(record, unicode), indent=1)


def read_record(path: Path) -> dict | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("version") == RECORD_VERSION else None


def record_status(record: dict) -> str:
    """The gradebook's status of a record: graded, not started (every component), no exercise files, or error: why."""
    if record.get("status") == "error":
        error = (str(record.get("error", "")).strip().splitlines() or ["unknown"])[0][:120]
        return "no exercise files" if error.startswith("no exercise files") else f"error: {error}"
    components = (record.get("report") or {}).get("components") or []
    if components and all(c.get("status") == "not started" for c in components):
        return "not started"
    return "graded"


def write_gradebook(out: Path, students: list[str] | None = None, known: dict[str, dict] | None = None) -> Path:
    """gradebook.csv from the per-student files (every student with a results file, or those named);
    `known` records (by student) are used instead of reading their files again.

    Columns: student, total, status (see `record_status`: zeros from untouched stubs and zeros from
    a folder without exercise files read differently), then the points of each component. Every cell is a
    `csv_cell`: a student's folder named `=HYPERLINK(...)` is text in a spreadsheet, not a formula."""
    from ...course import load_course

    components = [c.id for c in load_course().components]
    results = out / "results"
    names = students if students is not None else sorted(p.stem for p in results.glob("*.json"))
    known = known or {}
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["student", "total", "status", *components])  # the course's ids: no cell of a student's
    for name in names:
        record = known.get(name) or read_record(results / f"{name}.json")
        if record is None:
            continue
        status = record.get("gradebook_status") or record_status(record)
        writer.writerow(map(csv_cell, [name, f"{record['score']:g}", status,
                                       *(f"{record['components'].get(c, 0.0):g}" for c in components)]))
    path = out / "gradebook.csv"
    write_atomic(path, buffer.getvalue())
    return path
